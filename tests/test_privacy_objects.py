"""Privacy mechanisms are objects the client calls at each step of its round
(cotrain.privacy.mechanisms.base): ``check_federation`` once before training, ``prepare`` once per
client, ``before_fit`` and ``release_round`` every round; anything else is refused with a
TypeError naming what to implement.
"""

from __future__ import annotations

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
from cotrain.privacy.accounting.epsilon import noop_event


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


# ------------------------------------------------------------------ anything else is refused
def test_as_mechanism_keeps_new_mechanisms_and_refuses_everything_else():
    rr = RandomizedResponse(epsilon=1.0)
    assert as_mechanism(rr) is rr and as_mechanism(None) is None

    class OldRandomizedResponse:  # the earlier protocol: applies_to and randomize
        applies_to = "hard"

        def randomize(self, labels, n_classes, rng):
            return labels

        def dp_event(self, n_classes, n_labels):
            return noop_event()

    for other in (OldRandomizedResponse(), object(), "rr"):
        with pytest.raises(TypeError, match="implement dp_event and randomize or release_round"):
            as_mechanism(other)
