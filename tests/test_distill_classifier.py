"""`FederatedCoTrainer.distill` takes a classifier: a regressor is refused before fitting,
with a TypeError that names it; the "did you mean" helper every name lookup uses."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from cotrain import FederatedCoTrainer
from cotrain.params import check_params, did_you_mean


@pytest.fixture(scope="module")
def trainer():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    return FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=2)] * 2, rounds=1, random_state=0, trust=None
    ).fit([X[:30], X[30:60]], [y[:30], y[30:60]], X_public=X[60:])


@pytest.mark.parametrize("regressor", [LinearRegression(), DecisionTreeRegressor()])
def test_distill_refuses_a_regressor(trainer, regressor):
    name = type(regressor).__name__
    with pytest.raises(TypeError) as info:
        trainer.distill(regressor)
    assert str(info.value) == (
        f"distill(estimator) must be a classifier (it is fitted on the consensus class "
        f"labels), got {name}, a regressor"
    )


def test_distill_takes_a_classifier_or_a_tagless_one(trainer):
    model = trainer.distill(LogisticRegression())
    assert set(model.predict(trainer.X_public_)) <= {0, 1}

    class Plain(BaseEstimator):  # a classifier whose tags name no estimator type
        def fit(self, X, y):
            self.label = int(np.bincount(y).argmax())
            return self

        def predict(self, X):
            return np.full(len(X), self.label)

    assert trainer.distill(Plain()).predict(trainer.X_public_[:2]).shape == (2,)
    with pytest.raises(TypeError, match=r"must be a scikit-learn-style classifier, got str"):
        trainer.distill("LogisticRegression")


def test_did_you_mean():
    assert did_you_mean("majorty", ["majority", "mean"]) == "; did you mean 'majority'?"
    assert did_you_mean("rf", ["DT", "RF"]) == "; did you mean 'RF'?"
    assert did_you_mean("zzz", ["majority", "mean"]) == ""
    with pytest.raises(ValueError, match=r"got 'sfot'; did you mean 'soft'\?$"):
        check_params({"share": "sfot"})
