"""A client whose labels are one float class (0.0/1.0 labels, one client holding only 1.0).

ClassAlignedClassifier fits a DummyClassifier for a single-class training set; it used to
build ``DummyClassifier(strategy="constant", constant=np.float64(1.0))``, which scikit-learn
refuses (a constant must be an int, a str or an array-like), so co-training with float labels
stopped in round 1 with that client's error.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from learners import ClassAlignedClassifier


def test_single_float_class_fits_a_constant_model():
    X = np.arange(10.0).reshape(-1, 1)
    clf = ClassAlignedClassifier(DecisionTreeClassifier(), classes=[0.0, 1.0])
    with pytest.warns(UserWarning, match="single class"):
        clf.fit(X, np.ones(10))
    assert clf.predict(X).tolist() == [1.0] * 10
    np.testing.assert_array_equal(clf.predict_proba(X), np.tile([0.0, 1.0], (10, 1)))


def test_cotraining_with_float_labels_and_a_single_class_client():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(20, 3)) for _ in range(3)]
    y = [(x[:, 0] > 0).astype(np.float64) for x in X]
    y[1] = np.ones(20)  # this client holds only class 1.0
    X_public = rng.normal(size=(30, 3))
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=0) for _ in range(3)], rounds=2, random_state=0
    )
    with pytest.warns(UserWarning, match="single class"):
        trainer.fit(X, y, X_public=X_public)
    np.testing.assert_array_equal(trainer.classes_, [0.0, 1.0])
    assert trainer.n_rounds_ == 2
    assert set(trainer.predict(X_public).tolist()) <= {0.0, 1.0}
