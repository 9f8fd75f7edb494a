"""Pipelines: the trainer as the last step after transforms is refused, because a
Pipeline transforms X but passes X_public and eval_set through untransformed; a per-client
pipeline as each client's estimator is the way to scale, and works."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.datasets import load_breast_cancer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer


def shifted(seed=0):
    """Breast cancer with every feature moved far off and scaled by up to 10^3 either way:
    a learner that needs scaled features fails on it unless it scales them itself."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    X = X * 10.0 ** rng.uniform(-3, 3, X.shape[1]) + rng.normal(0, 1e4, X.shape[1])
    groups = np.repeat(np.arange(3), 20)
    return {
        "X": X[:60], "y": y[:60], "groups": groups,
        "X_public": X[60:360], "y_public": y[60:360], "X_test": X[360:], "y_test": y[360:],
    }  # fmt: skip


def fit_svc(data, estimator):
    trainer = FederatedCoTrainer([estimator] * 3, rounds=3, random_state=0, trust=None)
    return trainer.fit(
        data["X"], data["y"], groups=data["groups"], X_public=data["X_public"],
        y_public=data["y_public"], eval_set=(data["X_test"], data["y_test"]),
    )  # fmt: skip


def test_per_client_pipelines_scale_each_clients_own_data():
    data = shifted()
    scaled = fit_svc(data, make_pipeline(StandardScaler(), SVC()))
    # measured 0.909 (test) and 0.927 (pseudo-labels)
    assert scaled.score(data["X_test"], data["y_test"]) > 0.87
    assert scaled.history_[-1].pseudo_label_accuracy > 0.88
    # the data does need scaling: an SVC on the raw features scores near the majority class
    raw = fit_svc(data, SVC())
    assert raw.score(data["X_test"], data["y_test"]) < 0.70  # measured 0.612


def test_the_trainer_after_transforms_in_a_pipeline_is_refused_before_training():
    data = shifted()
    trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=1)
    pipe = Pipeline([("scale", StandardScaler()), ("cotrain", trainer)])
    with pytest.raises(
        ValueError, match=r"final step of a Pipeline after \['scale'\].*own pipeline"
    ):
        pipe.fit(data["X"], data["y"], cotrain__groups=data["groups"],
                 cotrain__X_public=data["X_public"])  # fmt: skip
    assert not hasattr(trainer, "history_")


def test_the_refusal_holds_under_metadata_routing():
    data = shifted()
    with sklearn.config_context(enable_metadata_routing=True):
        trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=1)
        trainer.set_fit_request(X_public=True, groups=True)
        pipe = make_pipeline(StandardScaler(), trainer)
        with pytest.raises(ValueError, match="final step of a Pipeline after"):
            pipe.fit(data["X"], data["y"], groups=data["groups"], X_public=data["X_public"])


def test_a_pipeline_without_transforms_before_the_trainer_is_fine():
    data = shifted()
    trainer = FederatedCoTrainer([DecisionTreeClassifier(random_state=0)] * 3, rounds=1)
    pipe = Pipeline([("nothing", "passthrough"), ("cotrain", trainer)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe.fit(data["X"], data["y"], cotrain__groups=data["groups"],
                 cotrain__X_public=data["X_public"])  # fmt: skip
    assert pipe.score(data["X_test"], data["y_test"]) > 0.85
