"""Neighbouring relations: add/remove by construction for the teachers, ε under both relations.

Known answers: the teachers' GNMax sensitivity under each relation, the issue's example
(σ = 40, |U| = 300, 2 rounds, δ = 1e-5) against dp-accounting's PLD, the label randomisers'
replace-one events, and a measured one-teacher sensitivity over 100 removals and 100 additions.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from sklearn.datasets import load_digits
from sklearn.tree import DecisionTreeClassifier

from consensus import NoisyArgmax
from cotrain.privacy import (
    GaussianSoftLabels,
    PrivacyLedger,
    RandomizedResponse,
    SubsampleAndAggregate,
    XORMechanism,
    teacher_shards,
    teacher_votes,
)
from cotrain.privacy.accounting.composition import RELATIONS, RunningComposition
from cotrain.privacy.accounting.epsilon import (
    epsilon_spent,
    gaussian_epsilon,
    gaussian_event,
    rr_event,
)
from cotrain.privacy.ledgers.ledger import relation_events
from cotrain.privacy.mechanisms.base import LabelMechanism

dp = pytest.importorskip("dp_accounting")


def pld_epsilon(event, count, relation, delta=1e-5):
    rel = {
        "add_or_remove": dp.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": dp.NeighboringRelation.REPLACE_ONE,
    }[relation]
    accountant = dp.pld.PLDAccountant(rel)
    accountant.compose(event, count)
    return accountant.get_epsilon(delta)


def membership(shards, n):
    """teacher of each row, from a list of index arrays."""
    out = np.full(n, -1)
    for j, s in enumerate(shards):
        out[s] = j
    assert (out >= 0).all()
    return out


# ------------------------------------------------------------------ GNMax sensitivity


def test_gnmax_sensitivity_and_noise_multiplier_under_each_relation():
    sa = SubsampleAndAggregate(sigma=40.0)
    assert sa.neighbors == "add_or_remove"
    assert sa.l2_sensitivity(300) == pytest.approx(math.sqrt(600), rel=1e-15)
    assert sa.l2_sensitivity(300, "replace_one") == pytest.approx(2 * math.sqrt(600), rel=1e-15)
    # the same event under both relations; dp-accounting reads it at twice the sensitivity
    # under REPLACE_ONE: noise multiplier 40 / sqrt(600) = 1.63299 vs 40 / (2 sqrt 600) = 0.81650
    for relation in RELATIONS:
        event = sa.relation_event(10, 300, relation)
        assert event.noise_multiplier == pytest.approx(1.6329931618554521, rel=1e-12)
    one = epsilon_spent([sa.dp_event(10, 300)], 1e-5, relation="replace_one")
    assert one == pytest.approx(gaussian_epsilon(0.8164965809277261, 1e-5), rel=1e-9)
    assert epsilon_spent([sa.dp_event(10, 300)], 1e-5) == pytest.approx(
        gaussian_epsilon(1.6329931618554521, 1e-5), rel=1e-9
    )


def test_rr_aggregate_is_the_same_under_both_relations():
    sa = SubsampleAndAggregate(epsilon=3.0, aggregate="rr")
    a, r = (sa.relation_event(10, 50, rel) for rel in RELATIONS)
    assert a == r and a.count == 50
    assert epsilon_spent([a], 1e-5, accountant="basic") == pytest.approx(3.0, rel=1e-9)


def test_issue_example_printed_for_both_relations_equals_dp_accounting_pld():
    ledger = PrivacyLedger([SubsampleAndAggregate(n_teachers=50, sigma=40.0)], 2, 10, 300)
    ledger.record([0, 1])
    ledger.record([0, 1])
    report = ledger.report()
    event = dp.GaussianDpEvent(40.0 / math.sqrt(600))
    want = {r: pld_epsilon(event, 2, r) for r in RELATIONS}
    assert round(want["add_or_remove"], 4) == 3.7086 and round(want["replace_one"], 4) == 8.3854
    assert report["relation"] == "add_or_remove"
    for r in RELATIONS:
        assert round(report["epsilon_by_relation"][r], 4) == round(want[r], 4)
        for client in report["clients"]:
            assert round(client["epsilon_by_relation"][r], 4) == round(want[r], 4)
    assert report["max_epsilon"] == report["epsilon_by_relation"]["add_or_remove"]
    # the printed words name the relation, the adversary and the assumptions
    text = report["protects"]
    assert text.startswith("ε protects one private training record of a client against the server")
    assert "one record added or removed; the replace-one ε is given too" in text
    assert "(which may deviate)" in text
    assert any("re-ask a round" in a and "site_ledger" in a for a in report["assumptions"])
    assert any("colluding" in a and "no cross-site" in a for a in report["assumptions"])


# ------------------------------------------------------------------ add/remove by construction


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:400].reshape(-1, 8, 8), y[:400]  # images: rows of shape (8, 8)


@pytest.mark.parametrize("n_teachers", [10, 50])
def test_100_removals_and_100_additions_change_exactly_one_teacher(digits, n_teachers):
    X, y = digits
    n = len(X)
    rng = np.random.default_rng(2027)
    key = rng.bytes(32)
    before = membership(teacher_shards(X, y, n_teachers, key), n)
    changed_per_case = []
    for r in rng.choice(n, size=100, replace=False):
        keep = np.arange(n) != r
        after = membership(teacher_shards(X[keep], y[keep], n_teachers, key), n - 1)
        assert np.array_equal(after, before[keep])  # every other record keeps its teacher
        # teachers whose set of training records changed (records named by original index)
        ids = np.flatnonzero(keep)
        changed = [
            j
            for j in range(n_teachers)
            if set(np.flatnonzero(before == j).tolist()) != set(ids[after == j].tolist())
        ]
        changed_per_case.append(len(changed))
        assert changed == [before[r]]
    extra_X = rng.normal(8.0, 4.0, size=(100, 8, 8))
    extra_y = rng.integers(0, 10, size=100)
    for x_new, y_new in zip(extra_X, extra_y, strict=True):
        at = int(rng.integers(0, n + 1))  # inserted anywhere: position plays no part
        X2 = np.insert(X, at, x_new, axis=0)
        y2 = np.insert(y, at, y_new)
        after = membership(teacher_shards(X2, y2, n_teachers, key), n + 1)
        old = np.delete(after, at)
        assert np.array_equal(old, before)
        # exactly one teacher's training data changed: the multiset of shards differs in one
        sizes_before = np.bincount(before, minlength=n_teachers)
        sizes_after = np.bincount(after, minlength=n_teachers)
        assert (sizes_after != sizes_before).sum() == 1
        changed_per_case.append(int((sizes_after != sizes_before).sum()))
    assert changed_per_case == [1] * 200


@pytest.mark.parametrize("kind", ["sparse", "frame", "text"])
def test_other_record_kinds_keep_their_teacher_under_removal(kind):
    rng = np.random.default_rng(0)
    dense = rng.integers(0, 3, size=(60, 12)).astype(float)
    y = rng.integers(0, 2, size=60)
    if kind == "sparse":
        X = sparse.csr_matrix(dense)
    elif kind == "frame":
        X = pd.DataFrame({"a": dense[:, 0], "b": [f"w{int(v)}" for v in dense[:, 1]]})
    else:
        X = np.array([" ".join(f"t{int(v)}" for v in row) for row in dense])
    key = rng.bytes(32)
    before = membership(teacher_shards(X, y, 7, key), 60)
    for r in rng.choice(60, size=20, replace=False):
        keep = np.flatnonzero(np.arange(60) != r)
        Xk = X.iloc[keep] if kind == "frame" else X[keep]
        after = membership(teacher_shards(Xk, y[keep], 7, key), 59)
        assert np.array_equal(after, before[keep])


@pytest.mark.filterwarnings("ignore:.*single class:UserWarning")  # small shards
def test_removing_one_record_moves_at_most_one_vote_per_public_example(digits):
    X, y = digits
    X, y = X.reshape(len(X), -1)[:150], y[:150]
    U = load_digits().data[1000:1200]
    tree = DecisionTreeClassifier(random_state=0)
    classes = np.arange(10)
    full = teacher_votes(tree, X, y, U, classes, np.random.default_rng(9), n_teachers=30)
    for r in (0, 77, 149):
        keep = np.arange(len(X)) != r
        less = teacher_votes(
            tree, X[keep], y[keep], U, classes, np.random.default_rng(9), n_teachers=30
        )
        diff = full - less
        # one teacher moved (L1 <= 2 per example) or stopped voting (L1 = 1)
        assert np.abs(diff).sum(axis=1).max() <= 2
        assert np.linalg.norm(diff) <= math.sqrt(2 * len(U))


def test_errors_do_not_state_the_clients_row_count():
    X = np.zeros((13, 2))
    with pytest.raises(ValueError) as info:
        teacher_votes(
            DecisionTreeClassifier(), X, np.zeros(12), X[:2], np.array([0, 1]),
            np.random.default_rng(0), n_teachers=3,
        )  # fmt: skip
    assert "13" not in str(info.value) and "12" not in str(info.value)
    with pytest.raises(ValueError) as info:
        teacher_shards(X, np.zeros(12), 3, b"k")
    assert "13" not in str(info.value) and "12" not in str(info.value)
    with pytest.raises(TypeError, match="key must be bytes"):
        teacher_shards(X, np.zeros(13), 3, "not bytes")


# ------------------------------------------------------------------ the label randomisers


def test_claimed_sensitivity_counts_twice_under_replace_one_trivial_bound_once():
    rr = RandomizedResponse(epsilon=1.0, sensitivity=5)
    a, r = (rr.relation_event(10, 100, rel) for rel in RELATIONS)
    assert (a.count, r.count) == (5, 10)
    basic = {
        rel: epsilon_spent([e], 1e-5, accountant="basic")
        for rel, e in zip(RELATIONS, (a, r), strict=True)
    }
    assert basic == pytest.approx({"add_or_remove": 1.0, "replace_one": 2.0}, rel=1e-12)
    trivial = RandomizedResponse(epsilon=1.0)
    assert trivial.relation_event(10, 100, "replace_one") == trivial.dp_event(10, 100)
    label = RandomizedResponse(epsilon=1.0, unit="label")
    assert label.relation_event(10, 100, "replace_one") == label.dp_event(10, 100)
    xor = XORMechanism(epsilon=1.0, sensitivity=6)
    assert xor.relation_event(3, 100, "replace_one").count == 12
    assert (
        XORMechanism(epsilon=1.0, sensitivity=150).relation_event(3, 100, "replace_one").count
        == 200
    )
    # Gaussian soft labels: s* = 4 rows -> sqrt(8) add/remove, sqrt(16) replace-one
    g = GaussianSoftLabels(sigma=2.0, sensitivity=4)
    eps = {
        rel: epsilon_spent([g.relation_event(3, 100, rel)], 1e-5, relation=rel) for rel in RELATIONS
    }
    assert eps["add_or_remove"] == pytest.approx(
        gaussian_epsilon(2.0 / math.sqrt(8), 1e-5), rel=1e-9
    )
    assert eps["replace_one"] == pytest.approx(gaussian_epsilon(2.0 / 4.0, 1e-5), rel=1e-9)
    trivial_g = GaussianSoftLabels(sigma=2.0)
    both = [
        epsilon_spent([trivial_g.relation_event(3, 8, rel)], 1e-5, relation=rel)
        for rel in RELATIONS
    ]
    assert both[0] == pytest.approx(both[1], rel=1e-9)


# ------------------------------------------------------------------ the ledger's relations


class ReplaceOnly(LabelMechanism):
    """A custom mechanism that states its event under replace-one only."""

    neighbors = "replace_one"

    def __init__(self, budget=None, delta=1e-5):
        self.budget = budget
        self.delta = delta

    def randomize(self, labels, n_classes, rng):
        return labels

    def dp_event(self, n_classes, n_labels):
        return rr_event(0.5, 2)


def test_a_mechanism_states_only_its_own_relation_by_default():
    assert sorted(relation_events(ReplaceOnly(), 2, 10)) == ["replace_one"]
    ledger = PrivacyLedger([ReplaceOnly()], 1, 2, 10)
    ledger.record([0])
    report = ledger.report()
    assert report["relation"] == "replace_one"
    assert report["epsilon_by_relation"]["add_or_remove"] is None
    assert "replace-one neighbours only" in report["protects"]
    # with an add/remove-only mechanism in the same guarantee, no relation is common
    with pytest.raises(ValueError, match="no common neighbouring relation"):
        PrivacyLedger([ReplaceOnly(), NoisyArgmaxServerSide()], 1, 2, 10)


class NoisyArgmaxServerSide:
    """Duck-typed, record-level against the server, add/remove by default."""

    delta = 1e-5
    budget = None

    def dp_event(self, n_classes, n_labels):
        return gaussian_event(3.0)


def test_noisy_argmax_states_both_relations_alike_with_its_default_sensitivity():
    # all n votes may change under either relation: replace-one costs nothing more
    ledger = PrivacyLedger([NoisyArgmax(sigma=40.0)], 2, 10, 200)
    ledger.record([0, 1])
    report = ledger.report()
    assert (report["unit"], report["adversary"], report["relation"]) == (
        "record", "broadcast observers", "add_or_remove",
    )  # fmt: skip
    by = report["epsilon_by_relation"]
    assert by["replace_one"] == pytest.approx(by["add_or_remove"], rel=1e-6)
    # a claimed sensitivity counts twice under replace-one
    claimed = PrivacyLedger([NoisyArgmax(sigma=40.0, sensitivity=20)], 1, 10, 200)
    claimed.record([0])
    by = claimed.report()["epsilon_by_relation"]
    assert by["replace_one"] > by["add_or_remove"]
    assert any("honest server" in a for a in report["assumptions"])
    assert "not against the server" in report["protects"]


def test_sampled_gaussian_under_replace_one_matches_dp_accounting():
    step = dp.PoissonSampledDpEvent(0.1, dp.GaussianDpEvent(1.0))
    event = dp.SelfComposedDpEvent(step, 20)
    for relation in RELATIONS:
        ours = RunningComposition(1e-5, relation=relation).compose(event, 2).epsilon()
        theirs = pld_epsilon(event, 2, relation)
        # cotrain's PLD is discretised at 1e-3·ε (pessimistic), dp-accounting's at 1e-4
        assert theirs <= ours <= theirs * 1.001
    # replace-one costs more for the same event
    assert pld_epsilon(event, 2, "replace_one") > pld_epsilon(event, 2, "add_or_remove")
