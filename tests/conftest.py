"""Shared fixtures: small federations on bundled data, and instrumented estimators."""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier


class RecordingTree(DecisionTreeClassifier):
    """A decision tree that records the size of every training set it is given."""

    sizes: ClassVar[list[int]] = []  # shared across clones; reset by the fixture

    def fit(self, X, y, sample_weight=None, check_input=True):
        RecordingTree.sizes.append(len(X))
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


class FailingClassifier(ClassifierMixin, BaseEstimator):
    """Fails in ``fit`` when given more than ``max_rows`` rows (always if None).

    With ``max_rows`` just above a client's private size it fails from round 2 on, once
    pseudo-labelled public rows join the training set.
    """

    def __init__(self, max_rows=None):
        self.max_rows = max_rows

    def fit(self, X, y, sample_weight=None):
        if self.max_rows is None or len(X) > self.max_rows:
            raise ArithmeticError("deliberate failure")
        self.tree_ = DecisionTreeClassifier(random_state=0).fit(X, y)
        self.classes_ = self.tree_.classes_
        return self

    def predict(self, X):
        return self.tree_.predict(X)


class WarningTree(DecisionTreeClassifier):
    """A tree that warns on every fit, like a chatty learner."""

    def fit(self, X, y, sample_weight=None, check_input=True):
        for _ in range(50):
            warnings.warn("chatty learner warning", RuntimeWarning, stacklevel=2)
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


@pytest.fixture
def recording_tree():
    RecordingTree.sizes = []
    return RecordingTree


@pytest.fixture(scope="session")
def cancer():
    """Breast cancer: 60 labelled rows over 3 clients, 300 public, 209 test (standardised)."""
    return cancer_split()


def cancer_split():
    """The data of the ``cancer`` fixture, for code that runs outside pytest."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    lab, pub, test = slice(0, 60), slice(60, 360), slice(360, None)
    X = (X - X[pub].mean(axis=0)) / X[pub].std(axis=0)  # standardised on the public pool
    parts = np.array_split(np.arange(60), 3)
    return {
        "X": [X[lab][p] for p in parts],
        "y": [y[lab][p] for p in parts],
        "X_public": X[pub],
        "y_public": y[pub],
        "X_test": X[test],
        "y_test": y[test],
    }


class SlowTree(DecisionTreeClassifier):
    """A tree whose fit sleeps ``delay`` seconds once it sees pseudo-labelled rows."""

    def __init__(self, delay=0.0, max_rows=25, random_state=None):
        super().__init__(random_state=random_state)
        self.delay = delay
        self.max_rows = max_rows

    def fit(self, X, y, sample_weight=None, check_input=True):
        import time

        if len(X) > self.max_rows:
            time.sleep(self.delay)
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


def mixed_site_learners():
    """The three mixed learners of the Flower tests' sites (tree, logistic, 3-NN)."""
    return [
        DecisionTreeClassifier(max_depth=4),
        LogisticRegression(max_iter=300),
        KNeighborsClassifier(n_neighbors=3),
    ]


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny networks train many times faster on one thread, above all on a busy machine
    (``pytestmark = pytest.mark.usefixtures("one_torch_thread")`` in a torch test file)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def digits_split():
    """Digits scaled to [0, 1] (float32), split 70/30, stratified, seed 0."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
