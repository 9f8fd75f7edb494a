"""TimeBudget: as many rounds as fit in a wall-clock budget, never a round cut off."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.baselines import FedAvg
from cotrain.callbacks import TimeBudget


class StepClock:
    """A clock that moves ``step`` seconds every time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def federation(seed: int = 0) -> tuple[list, list, np.ndarray]:
    X, y = make_classification(n_samples=260, n_features=6, random_state=seed)
    parts = np.array_split(np.arange(120), 3)
    return [X[p] for p in parts], [y[p] for p in parts], X[120:]


def cotrain_with(budget: float, rounds: int) -> FederatedCoTrainer:
    """A FedCT run of at most ``rounds`` under ``TimeBudget(budget)`` on a 1-second clock."""
    Xs, ys, U = federation()
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=0)] * 3,
        rounds=rounds,
        trust=None,
        random_state=0,
        callbacks=[TimeBudget(budget, clock=StepClock(1.0))],
    )
    return trainer.fit(Xs, ys, X_public=U)


def test_stops_before_a_round_that_would_pass_the_budget() -> None:
    # the clock is read at fit start (1), and at each round's start and end: round 1 runs
    # from 2 to 3 (slowest 1 s); round 2 starts at 4: 4 - 1 + 1 = 4 <= 5, runs to 5;
    # round 3 would start at 6: 6 - 1 + 1 = 6 > 5, so the run stops after 2 rounds
    trainer = cotrain_with(5, rounds=10)
    assert len(trainer.history_) == 2
    assert trainer.stopped_reason_ == "time budget"


def test_a_generous_budget_leaves_the_rounds_alone() -> None:
    trainer = cotrain_with(1e6, rounds=3)
    assert len(trainer.history_) == 3
    assert trainer.stopped_reason_ is None


def test_the_first_round_runs_whatever_the_budget() -> None:
    assert len(cotrain_with(1e-9, rounds=4).history_) == 1


def test_fedavg_takes_it_too() -> None:
    pytest.importorskip("torch")
    from learners import TorchClassifier

    Xs, ys, _ = federation()
    fedavg = FedAvg(
        TorchClassifier(max_epochs=1, random_state=0),
        rounds=10,
        random_state=0,
        callbacks=[TimeBudget(5, clock=StepClock(1.0))],
    )
    fedavg.fit(Xs, ys)
    assert len(fedavg.history_) == 2
    assert fedavg.stopped_reason_ == "time budget"


@pytest.mark.parametrize("bad", [0, -1.0, "60", True, None, float("nan")])
def test_refuses_a_budget_that_is_not_a_positive_number(bad: object) -> None:
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        TimeBudget(bad)  # type: ignore[arg-type]


def test_numpy_numbers_are_budgets_too() -> None:
    assert TimeBudget(np.int64(60)).seconds == 60
    assert TimeBudget(np.float32(1.5)).seconds == 1.5
