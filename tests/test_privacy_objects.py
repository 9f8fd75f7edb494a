"""Privacy mechanisms are objects the client calls at each step of its round
(cotrain.privacy.mechanisms): ``check_federation`` once before training, ``prepare`` once per
client, ``before_fit`` and ``release_round`` every round. A mechanism of the earlier
``applies_to`` protocol keeps working for one release, adapted with a DeprecationWarning
(cotrain.privacy.legacy); anything else is refused with a TypeError naming what to implement.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.params import check_params
from cotrain.privacy import (
    ClientRound,
    LabelMechanism,
    RandomizedResponse,
    Release,
    SubsampleAndAggregate,
    as_mechanism,
)
from cotrain.privacy.accounting import gaussian_event, noop_event
from cotrain.privacy.legacy import LegacyMechanism


def _learners():
    return [DecisionTreeClassifier(random_state=0), GaussianNB(), DecisionTreeClassifier()]


def _fit(cancer, privacy, **params):
    params = {"rounds": 2, "random_state": 0, **params}
    trainer = FederatedCoTrainer(_learners(), privacy=privacy, classes=[0, 1], **params)
    return trainer.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])


# ------------------------------------------------------------------ the protocol, called
CALLS: list[tuple] = []


class AllZeros(LabelMechanism):
    """Releases class 0 everywhere; records every hook the federation calls."""

    def __init__(self, budget=None, delta=1e-5):
        self.budget = budget
        self.delta = delta

    def check_federation(self, consensus, estimators):
        CALLS.append(("check_federation", type(consensus).__name__, len(estimators)))

    def prepare(self, estimator):
        CALLS.append(("prepare", type(estimator).__name__))
        return estimator

    def before_fit(self, model, seed):
        CALLS.append(("before_fit", seed is None))

    def release_round(self, step, rng):
        assert isinstance(step, ClientRound) and hasattr(step.model, "estimator_")
        assert len(step.X) == len(step.y) and step.X_public.shape[0] == step.n_labels
        CALLS.append(("release_round", step.n_labels, len(step.X_pool)))
        return Release(np.zeros(step.n_labels, dtype=np.int64))

    def dp_event(self, n_classes, n_labels):
        return noop_event()


def test_the_client_calls_each_hook_and_sends_what_release_round_returns(cancer):
    CALLS.clear()
    trainer = _fit(cancer, AllZeros())
    n_public = len(cancer["X_public"])
    assert CALLS[0] == ("check_federation", "MajorityVote", 3)
    assert CALLS[1:4] == [("prepare", "DecisionTreeClassifier"), ("prepare", "GaussianNB"),
                          ("prepare", "DecisionTreeClassifier")]  # fmt: skip
    rounds = [c for c in CALLS[4:] if c[0] == "release_round"]
    assert [c for c in CALLS[4:] if c[0] == "before_fit"] == [("before_fit", True)] * 6
    assert [c[1] for c in rounds] == [n_public] * 6
    assert [c[2] for c in rounds[:3]] == [0, 0, 0]  # round 1: no pseudo-labelled rows yet
    assert [c[2] for c in rounds[3:]] == [n_public] * 3  # round 2: every row labelled 0
    assert (trainer.pseudo_label_codes_ == 0).all()


def test_reproducible_noise_hands_before_fit_a_seed(cancer):
    CALLS.clear()
    with pytest.warns(UserWarning, match="reproducible_noise"):
        _fit(cancer, AllZeros(), reproducible_noise=True, rounds=1)
    assert [c for c in CALLS if c[0] == "before_fit"] == [("before_fit", False)] * 3


def test_a_mechanism_refuses_a_federation_before_any_training(cancer):
    from consensus import SoftMean

    with pytest.raises(ValueError, match="hard consensus"):
        _fit(cancer, SubsampleAndAggregate(n_teachers=4, sigma=1.0), consensus=SoftMean())


def test_shares_decides_which_labels_a_mechanism_may_randomise():
    class SoftOnly(AllZeros):
        shares = ("soft",)

    check_params({"privacy": SoftOnly(), "share": "soft"})
    with pytest.raises(ValueError, match="randomises soft labels but share='hard'"):
        check_params({"privacy": SoftOnly(), "share": "hard"})


def test_a_mechanism_without_randomize_or_release_round_says_what_to_implement():
    class Nothing(LabelMechanism):
        def dp_event(self, n_classes, n_labels):
            return noop_event()

    step = ClientRound(np.array([0, 1]), np.array([0, 1]))
    with pytest.raises(NotImplementedError, match=r"neither randomize.*nor release_round"):
        Nothing().release_round(step, np.random.default_rng(0))


# ------------------------------------------------------------------ the earlier protocol
class OldRandomizedResponse:
    """A user's mechanism of the earlier protocol: applies_to and randomize."""

    applies_to = "hard"

    def __init__(self, epsilon):
        self.inner = RandomizedResponse(epsilon=epsilon)
        self.delta, self.budget = self.inner.delta, None

    def randomize(self, labels, n_classes, rng):
        return self.inner.randomize(labels, n_classes, rng)

    def dp_event(self, n_classes, n_labels):
        return self.inner.dp_event(n_classes, n_labels)


class OldTeachers(LabelMechanism):
    """A LabelMechanism subclass of the earlier protocol: applies_to = "data"."""

    applies_to = "data"

    def __init__(self, n_teachers=4, sigma=2.0, budget=None, delta=1e-5):
        self.n_teachers, self.sigma, self.budget, self.delta = n_teachers, sigma, budget, delta

    def release(self, estimator, X, y, X_public, classes, rng, *, X_extra=None, y_extra=None):
        new = SubsampleAndAggregate(n_teachers=self.n_teachers, sigma=self.sigma)
        return new.release(estimator, X, y, X_public, classes, rng, X_extra=X_extra,
                           y_extra=y_extra)  # fmt: skip

    def dp_event(self, n_classes, n_labels):
        new = SubsampleAndAggregate(n_teachers=self.n_teachers, sigma=self.sigma)
        return new.dp_event(n_classes, n_labels)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (OldRandomizedResponse(epsilon=2.0), RandomizedResponse(epsilon=2.0)),
        (OldTeachers(), SubsampleAndAggregate(n_teachers=4, sigma=2.0)),
    ],
    ids=["hard", "data"],
)
def test_an_old_protocol_mechanism_still_works_with_a_deprecation_warning(cancer, old, new):
    params = {"reproducible_noise": True, "rounds": 2}
    with pytest.warns(DeprecationWarning, match=f"applies_to='{old.applies_to}'"):
        before = _fit(cancer, old, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new protocol: no warning
        with pytest.warns(UserWarning, match="reproducible_noise"):
            after = _fit(cancer, new, **params)
    # the same noise draws, the same consensus, the same accounting
    np.testing.assert_array_equal(before.pseudo_label_codes_, after.pseudo_label_codes_)
    assert [r.epsilon for r in before.history_] == [r.epsilon for r in after.history_]


class OldDPTraining:
    """The earlier protocol's "model" kind: prepare, seed_noise, round_event."""

    applies_to = "model"
    delta, budget, unit, adversary = 1e-5, None, "record", "server"

    def __init__(self):
        self.seeds = []

    def prepare(self, estimator):
        return estimator

    def seed_noise(self, model, seed):
        self.seeds.append(seed)

    def round_event(self, fitted):
        assert fitted is not None
        return gaussian_event(4.0)

    def reported_epsilon(self, events, delta):
        return 0.25 * len(events)  # a stand-in accountant: a quarter per reported round

    def randomize(self, labels, n_classes, rng):
        raise TypeError("not a label mechanism")

    def dp_event(self, n_classes, n_labels):
        raise TypeError("reported by the client")


def test_an_old_model_kind_mechanism_reports_its_events_and_trains_at_full_weight(cancer):
    pytest.importorskip("dp_accounting", reason="a DP-trained client is accounted with it")
    old = OldDPTraining()
    with pytest.warns(DeprecationWarning, match="applies_to='model'"):
        trainer = _fit(cancer, old, share="soft", consensus="mean")
    assert old.seeds == [None] * 6  # seeded from the OS's entropy, every client, every round
    assert [r.epsilon for r in trainer.history_] == [0.25, 0.5]
    plain = _fit(cancer, None, share="soft", consensus="mean", trust=None)
    np.testing.assert_array_equal(trainer.pseudo_label_codes_, plain.pseudo_label_codes_)


def test_as_mechanism_keeps_new_mechanisms_and_refuses_what_follows_no_protocol():
    rr = RandomizedResponse(epsilon=1.0)
    assert as_mechanism(rr) is rr and as_mechanism(None) is None
    with pytest.warns(DeprecationWarning, match="subclass cotrain.privacy.LabelMechanism"):
        wrapped = as_mechanism(OldRandomizedResponse(1.0))
    assert isinstance(wrapped, LegacyMechanism) and as_mechanism(wrapped) is wrapped
    assert (wrapped.shares, wrapped.reports_events, wrapped.delta) == (("hard",), False, 1e-5)

    class Unknown:
        applies_to = "model weights"

    with pytest.raises(TypeError, match="applies_to must be one of"):
        as_mechanism(Unknown())
    with pytest.raises(TypeError, match="implement dp_event and randomize or release_round"):
        as_mechanism(object())


def test_a_bare_randomizer_without_applies_to_randomises_whatever_is_shared():
    class Bare:
        delta, budget = 1e-5, None

        def randomize(self, labels, n_classes, rng):
            return labels

        def dp_event(self, n_classes, n_labels):
            return noop_event()

    with pytest.warns(DeprecationWarning, match="randomize without LabelMechanism"):
        mech = as_mechanism(Bare())
    assert mech.shares == ("hard", "soft") and mech.cross_validated_trust
    step = ClientRound(np.array([1, 0]), np.array([0, 1]))
    assert mech.release_round(step, np.random.default_rng(0)).labels.tolist() == [1, 0]
