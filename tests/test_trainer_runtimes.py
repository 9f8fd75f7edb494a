"""The same round logic in every runtime; stragglers sit a round out and are recorded."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from tests.conftest import SlowTree


def fit(cancer, estimators, **params):
    params.setdefault("rounds", 3)
    params.setdefault("random_state", 0)
    return FederatedCoTrainer(estimators, **params).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["sequential", "joblib"])
def test_named_runtimes_give_the_sequential_result(cancer, runtime):
    ests = [DecisionTreeClassifier(), GaussianNB(), DecisionTreeClassifier()]
    reference = fit(cancer, ests)
    other = fit(cancer, ests, runtime=runtime, n_jobs=2)
    np.testing.assert_array_equal(reference.pseudo_label_codes_, other.pseudo_label_codes_)


@pytest.mark.slow
def test_ray_runtime_gives_the_sequential_result(cancer):
    pytest.importorskip("ray")
    ests = [DecisionTreeClassifier(), GaussianNB(), DecisionTreeClassifier()]
    reference = fit(cancer, ests)
    ray_run = fit(cancer, ests, runtime="ray", n_jobs=2)
    np.testing.assert_array_equal(reference.pseudo_label_codes_, ray_run.pseudo_label_codes_)
    np.testing.assert_array_equal(
        reference.predict(cancer["X_test"]), ray_run.predict(cancer["X_test"])
    )


@pytest.mark.slow
def test_straggler_sits_the_round_out_and_is_recorded(cancer):
    ests = [SlowTree(delay=1.5), DecisionTreeClassifier(), DecisionTreeClassifier()]
    trainer = fit(cancer, ests, rounds=2, round_timeout=0.75, runtime="joblib", n_jobs=2)
    first, second = trainer.history_
    assert first.timed_out == () and second.timed_out == (0,)
    assert second.failed == {}
    assert trainer.history_.to_frame()["n_timed_out"].tolist() == [0, 1]
    # the round went on with the two clients that answered
    assert second.bytes_up == first.bytes_up * 2 // 3


@pytest.mark.slow
def test_sequential_runtime_cannot_interrupt_so_later_clients_wait(cancer):
    # documented: the overrunning client finishes; the clients after it are stragglers
    ests = [SlowTree(delay=1.0), DecisionTreeClassifier(), DecisionTreeClassifier()]
    trainer = fit(cancer, ests, rounds=2, round_timeout=0.5)
    assert trainer.history_[1].timed_out == (1, 2)


@pytest.mark.slow
def test_too_many_stragglers_fail_the_round(cancer):
    ests = [SlowTree(delay=1.5), SlowTree(delay=1.5), DecisionTreeClassifier()]
    # both workers are busy with the slow clients, so client 2 is still queued at the deadline
    with pytest.raises(RuntimeError, match=r"only 0 of 3 .* timed out: \[0, 1, 2\]"):
        fit(cancer, ests, rounds=2, round_timeout=0.75, min_clients=2, runtime="joblib", n_jobs=2)
