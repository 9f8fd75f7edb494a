"""Tests for the learners package: alignment, soft targets, the wrapper, XGBoost and RuleFit."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression, RidgeClassifier
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from learners import (
    ClassAlignedClassifier,
    RuleFitClassifier,
    XGBoostClassifier,
    align_proba,
    expand_soft_targets,
)

ROOT = Path(__file__).resolve().parents[1]


def _blobs(n_per_class: int = 20, n_classes: int = 3, seed: int = 0):
    """Well separated Gaussian blobs: class k is centred at (3k, -3k)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = rng.normal(size=(y.size, 2)) + np.c_[3 * y, -3 * y]
    return X, y


# --------------------------------------------------------------------------- align_proba


def test_align_proba_places_subset_columns_and_zero_fills():
    proba = np.array([[0.2, 0.8], [0.6, 0.4]])
    out = align_proba(proba, estimator_classes=[1, 3], classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(out, [[0.0, 0.2, 0.0, 0.8], [0.0, 0.6, 0.0, 0.4]])


def test_align_proba_reordered_string_labels():
    proba = np.array([[0.1, 0.3, 0.6]])
    out = align_proba(proba, estimator_classes=["dog", "ant", "cat"], classes=["ant", "cat", "dog"])
    np.testing.assert_array_equal(out, [[0.3, 0.6, 0.1]])


def test_align_proba_identity_and_dtype():
    proba = np.array([[1, 0], [0, 1]], dtype=np.int64)
    out = align_proba(proba, [0, 1], [0, 1])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, proba)


def test_align_proba_errors():
    with pytest.raises(ValueError, match=r"estimator_classes.*'zebra'"):
        align_proba([[0.5, 0.5]], ["ant", "zebra"], ["ant", "cat"])
    with pytest.raises(ValueError, match="not in classes"):
        align_proba([[0.5, 0.5]], [0, 7], [0, 1, 2])
    with pytest.raises(ValueError, match="shape"):
        align_proba([[0.5, 0.5, 0.0]], [0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="sorted and unique"):
        align_proba([[1.0]], [0], [2, 0, 1])


# --------------------------------------------------------------------- expand_soft_targets


def test_expand_soft_targets_exact_rows_labels_weights():
    X = np.array([[10.0], [20.0], [30.0]])
    targets = np.array(
        [
            [0.6, 0.4, 0.0],  # zero column dropped
            [0.05, 0.75, 0.2],  # 0.05 < min_weight: pruned, the rest renormalised over 0.95
            [0.0, 0.0, 1.0],
        ]
    )
    X_rep, y_rep, w_rep = expand_soft_targets(X, targets, ["a", "b", "c"], min_weight=0.1)
    np.testing.assert_array_equal(X_rep.ravel(), [10, 10, 20, 20, 30])
    assert y_rep.tolist() == ["a", "b", "b", "c", "c"]
    np.testing.assert_allclose(w_rep, [0.6, 0.4, 0.75 / 0.95, 0.2 / 0.95, 1.0])


def test_expand_soft_targets_sample_weight_argmax_kept_and_zero_rows_dropped():
    X = np.arange(4.0).reshape(-1, 1)
    targets = np.array(
        [
            [0.5, 0.5, 0.0],
            [0.05, 0.06, 0.04],  # all below min_weight: only the argmax survives, weight 1
            [0.0, 0.0, 0.0],  # no mass: dropped
            [0.2, 0.2, 0.6],  # unnormalised rows are fine too
        ]
    )
    X_rep, y_rep, w_rep = expand_soft_targets(
        X, targets, np.array([0, 1, 2]), sample_weight=[2.0, 3.0, 4.0, 5.0], min_weight=0.1
    )
    np.testing.assert_array_equal(X_rep.ravel(), [0, 0, 1, 3, 3, 3])
    np.testing.assert_array_equal(y_rep, [0, 1, 1, 0, 1, 2])
    np.testing.assert_allclose(w_rep, [1.0, 1.0, 3.0, 1.0, 1.0, 3.0])


def test_expand_soft_targets_sparse_input_and_errors():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]]))
    X_rep, y_rep, w_rep = expand_soft_targets(X, [[0.5, 0.5], [0.0, 1.0]], [0, 1])
    assert sp.issparse(X_rep)
    np.testing.assert_array_equal(X_rep.toarray(), [[1, 0], [1, 0], [0, 2]])
    np.testing.assert_array_equal(y_rep, [0, 1, 1])
    np.testing.assert_allclose(w_rep, [0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="rows"):
        expand_soft_targets(np.zeros((3, 1)), [[1.0, 0.0]], [0, 1])
    with pytest.raises(ValueError, match="shape"):
        expand_soft_targets(np.zeros((1, 1)), [[1.0, 0.0]], [0, 1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        expand_soft_targets(np.zeros((1, 1)), [[1.5, -0.5]], [0, 1])
    with pytest.raises(ValueError, match="min_weight"):
        expand_soft_targets(np.zeros((1, 1)), [[1.0, 0.0]], [0, 1], min_weight=0.0)


# ------------------------------------------------------------------ ClassAlignedClassifier


def test_wrapper_client_missing_classes_gets_global_columns():
    X, y = _blobs()
    keep = y != 1
    clf = ClassAlignedClassifier(DecisionTreeClassifier(random_state=0), classes=[0, 1, 2])
    clf.fit(X[keep], y[keep])
    proba = clf.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    np.testing.assert_array_equal(proba[:, 1], 0.0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(clf.predict(X)) <= {0, 2}
    assert clf.classes_.tolist() == [0, 1, 2] and clf.n_classes_ == 3
    assert isinstance(clf.estimator_, DecisionTreeClassifier)


def test_wrapper_single_class_fits_constant_with_one_warning():
    X, _ = _blobs()
    clf = ClassAlignedClassifier(LogisticRegression(), classes=[0, 1, 2])
    with pytest.warns(UserWarning, match="single class") as record:
        clf.fit(X, np.full(X.shape[0], 2))
    assert len([w for w in record if "single class" in str(w.message)]) == 1
    assert isinstance(clf.estimator_, DummyClassifier)
    np.testing.assert_array_equal(clf.predict(X), 2)
    np.testing.assert_array_equal(clf.predict_proba(X[:2]), [[0, 0, 1], [0, 0, 1]])
    with pytest.raises(ValueError):  # what the wrapper protects against
        LogisticRegression().fit(X, np.full(X.shape[0], 2))


def test_wrapper_string_labels_with_gaussian_nb():
    X, y = _blobs()
    names = np.array(["bird", "cat", "dog"])[y]
    clf = ClassAlignedClassifier(GaussianNB()).fit(X, names)
    assert clf.classes_.tolist() == ["bird", "cat", "dog"]
    assert (clf.predict(X) == names).mean() > 0.95
    clf = ClassAlignedClassifier(GaussianNB(), classes=["ant", "bird", "cat", "dog"])
    proba = clf.fit(X, names).predict_proba(X)
    np.testing.assert_array_equal(proba[:, 0], 0.0)
    assert proba.shape == (X.shape[0], 4)


def test_wrapper_soft_targets_change_the_tree():
    # all inputs equal, so the tree is a single leaf: with hard labels (argmax) it predicts
    # class 0 (two rows of three), with soft targets class 1 holds 1.9 of the 3.0 mass
    X = np.zeros((3, 1))
    targets = np.array([[0.55, 0.45], [0.55, 0.45], [0.0, 1.0]])
    soft = ClassAlignedClassifier(DecisionTreeClassifier(), classes=[0, 1]).fit(X, targets)
    hard = ClassAlignedClassifier(DecisionTreeClassifier(), classes=[0, 1])
    hard.fit(X, targets.argmax(axis=1))
    np.testing.assert_allclose(soft.predict_proba(X[:1]), [[1.1 / 3, 1.9 / 3]])
    np.testing.assert_allclose(hard.predict_proba(X[:1]), [[2 / 3, 1 / 3]])
    assert soft.predict(X[:1])[0] == 1 and hard.predict(X[:1])[0] == 0


def test_wrapper_soft_targets_without_sample_weight_fall_back_with_one_warning():
    X, y = _blobs()
    targets = np.eye(3)[y] * 0.8 + 0.1  # argmax is y
    clf = ClassAlignedClassifier(KNeighborsClassifier(n_neighbors=3), classes=[0, 1, 2])
    with pytest.warns(UserWarning, match="reduced to hard labels") as record:
        clf.fit(X, targets)
    assert len([w for w in record if "reduced to hard labels" in str(w.message)]) == 1
    ref = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    with pytest.raises(TypeError, match="sample_weight"):
        clf.fit(X, y, sample_weight=np.ones(y.size))


class _SoftLearner(ClassifierMixin, BaseEstimator):
    """Declares soft-target support and a `classes` parameter; remembers what it was fed."""

    accepts_soft_targets = True

    def __init__(self, classes=None):
        self.classes = classes

    def fit(self, X, y):
        self.y_seen_ = np.asarray(y)
        self.classes_ = np.asarray(self.classes)
        return self

    def predict_proba(self, X):
        return np.tile(self.y_seen_.mean(axis=0), (len(X), 1))

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


def test_wrapper_passes_soft_targets_through_and_sets_classes():
    targets = np.array([[0.2, 0.8, 0.0], [0.4, 0.6, 0.0]])
    clf = ClassAlignedClassifier(_SoftLearner(), classes=["x", "y", "z"]).fit(
        np.zeros((2, 1)), targets
    )
    np.testing.assert_array_equal(clf.estimator_.y_seen_, targets)
    assert clf.estimator_.classes.tolist() == ["x", "y", "z"]
    assert clf.estimator.classes is None  # the prototype is never touched
    np.testing.assert_allclose(clf.predict_proba(np.zeros((1, 1))), [[0.3, 0.7, 0.0]])
    assert clf.predict(np.zeros((1, 1))).tolist() == ["y"]


def test_wrapper_without_predict_proba_answers_one_hot():
    X, y = _blobs()
    keep = y != 0
    clf = ClassAlignedClassifier(RidgeClassifier(), classes=[0, 1, 2]).fit(X[keep], y[keep])
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(proba[:, 0], 0.0)
    np.testing.assert_array_equal(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X))


def test_wrapper_clone_get_params_set_params():
    clf = ClassAlignedClassifier(DecisionTreeClassifier(max_depth=3), classes=[0, 1])
    params = clf.get_params()
    assert params["estimator__max_depth"] == 3 and params["classes"] == [0, 1]
    twin = clone(clf)
    assert twin is not clf and twin.estimator is not clf.estimator
    assert twin.get_params()["estimator__max_depth"] == 3
    twin.set_params(estimator__max_depth=1)
    assert twin.estimator.max_depth == 1 and clf.estimator.max_depth == 3
    X, y = _blobs(n_classes=2)
    assert twin.fit(X, y).estimator_.get_depth() == 1
    assert not hasattr(twin.estimator, "tree_")


def test_wrapper_failed_fit_keeps_previous_model():
    X, y = _blobs()
    clf = ClassAlignedClassifier(LogisticRegression(), classes=[0, 1, 2]).fit(X, y)
    before, pred = clf.estimator_, clf.predict(X)
    X_bad = X.copy()
    X_bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        clf.fit(X_bad, y)
    assert clf.estimator_ is before
    np.testing.assert_array_equal(clf.predict(X), pred)


def test_wrapper_input_errors():
    X, y = _blobs()
    with pytest.raises(ValueError, match="not in classes"):
        ClassAlignedClassifier(GaussianNB(), classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="classes must be given"):
        ClassAlignedClassifier(GaussianNB()).fit(X, np.eye(3)[y])
    with pytest.raises(ValueError, match="one column per class"):
        ClassAlignedClassifier(GaussianNB(), classes=[0, 1]).fit(X, np.eye(3)[y])
    with pytest.raises(ValueError, match="sorted and unique"):
        ClassAlignedClassifier(GaussianNB(), classes=[2, 1, 0]).fit(X, y)
    with pytest.raises(ValueError, match="rows"):
        ClassAlignedClassifier(GaussianNB()).fit(X, y[:-1])


class _CountingLearner(ClassifierMixin, BaseEstimator):
    """Counts how many fits its fitted state has been through."""

    def __init__(self, warm_start=True, step=1):
        self.warm_start = warm_start
        self.step = step

    def fit(self, X, y):
        self.n_fits_ = getattr(self, "n_fits_", 0) + self.step
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


def test_wrapper_continues_warm_start_learners_from_a_copy():
    X, y = _blobs()
    clf = ClassAlignedClassifier(_CountingLearner())
    first = clf.fit(X, y).estimator_
    second = clf.fit(X, y).estimator_
    assert (first.n_fits_, second.n_fits_) == (1, 2)  # continued from a copy of `first`
    assert second is not first and not hasattr(clf.estimator, "n_fits_")
    clf.set_params(estimator__step=10)  # a changed hyper-parameter reaches the continued copy
    assert clf.fit(X, y).estimator_.n_fits_ == 12
    with pytest.warns(UserWarning, match="single class"):
        clf.fit(X, np.zeros(y.size, dtype=int))
    assert clf.fit(X, y).estimator_.n_fits_ == 10  # after a constant round: a fresh start
    cold = ClassAlignedClassifier(_CountingLearner(warm_start=False))
    assert cold.fit(X, y).fit(X, y).estimator_.n_fits_ == 1


def test_wrapper_continues_xgboost_booster():
    pytest.importorskip("xgboost")
    X, y = _blobs()
    keep = y != 2
    clf = ClassAlignedClassifier(
        XGBoostClassifier(n_estimators=3, continue_rounds=2, random_state=0), classes=[0, 1, 2]
    )
    first = clf.fit(X[keep], y[keep]).estimator_
    assert first.classes_.tolist() == [0, 1, 2]  # global classes were set on the copy
    assert first.booster_.num_boosted_rounds() == 3
    second = clf.fit(X, y).estimator_
    assert second.booster_.num_boosted_rounds() == 3 + 2
    assert len(second.booster_.get_dump()) == (3 + 2) * 3  # one tree per class per round
    assert first.booster_.num_boosted_rounds() == 3  # the previous model is untouched
    assert clf.fit(X, y).estimator_.booster_.num_boosted_rounds() == 3 + 2 + 2
    assert not hasattr(clf.estimator, "booster_")
    assert clf.predict_proba(X).shape == (X.shape[0], 3)


# ------------------------------------------------------------------------ XGBoostClassifier


@pytest.fixture(scope="module")
def xgb():
    return pytest.importorskip("xgboost")


def test_xgboost_missing_classes(xgb):
    X, y = _blobs()
    keep = y != 1
    # all rows and features at every split (xgboost's defaults, not this class's): the
    # bound below is about the absent class's column, not about the sampling defaults
    clf = XGBoostClassifier(
        n_estimators=10, classes=[0, 1, 2], random_state=0, subsample=1.0, colsample_bynode=1.0
    )
    proba = clf.fit(X[keep], y[keep]).predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    assert proba[:, 1].max() < 0.05
    assert (clf.predict(X[keep]) == y[keep]).all()

    single = XGBoostClassifier(n_estimators=10, classes=[0, 1, 2], warm_start=False)
    proba = single.fit(X, np.full(y.size, 1)).predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    assert proba[:, [0, 2]].max() < 0.05  # uniform start, pushed down by 10 rounds
    np.testing.assert_array_equal(single.predict(X), 1)


def test_xgboost_string_labels_and_sparse_input(xgb):
    X, y = _blobs()
    names = np.array(["a", "b", "c"])[y]
    clf = XGBoostClassifier(n_estimators=10, random_state=0).fit(sp.csr_matrix(X), names)
    assert clf.classes_.tolist() == ["a", "b", "c"] and clf.n_features_in_ == 2
    assert (clf.predict(X) == names).mean() > 0.95


def test_xgboost_is_deterministic_for_a_seed(xgb):
    X, y = _blobs(seed=1)
    kw = dict(n_estimators=10, subsample=0.6, colsample_bytree=0.5, n_jobs=2)
    p1 = XGBoostClassifier(random_state=3, **kw).fit(X, y).predict_proba(X)
    p2 = XGBoostClassifier(random_state=3, **kw).fit(X, y).predict_proba(X)
    p3 = XGBoostClassifier(random_state=4, **kw).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p1, p2)
    assert not np.allclose(p1, p3)


def test_xgboost_warm_start_grows_booster_and_changes_predictions(xgb):
    X, y = _blobs()
    clf = XGBoostClassifier(n_estimators=5, continue_rounds=4, random_state=0)
    before = clf.fit(X, y).predict_proba(X)
    flipped = (y + 1) % 3
    after = clf.fit(X, flipped).predict_proba(X)
    assert clf.booster_.num_boosted_rounds() == 9
    assert not np.allclose(before, after)
    cold = XGBoostClassifier(n_estimators=5, warm_start=False).fit(X, y).fit(X, flipped)
    assert cold.booster_.num_boosted_rounds() == 5


@pytest.mark.parametrize("random_state", [3, None])
def test_xgboost_continuation_draws_the_same_whatever_ran_before(xgb, random_state):
    """A continued fit samples rows and features from its seed and its booster alone, so a
    model restored from a checkpoint continues exactly as the one kept in memory (xgboost's
    sampler is one per process: before, it went on from the last fit the process ran)."""
    X, y = load_breast_cancer(return_X_y=True)
    kept = XGBoostClassifier(random_state=random_state).fit(X[:100], y[:100])
    restored = pickle.loads(pickle.dumps(kept))
    XGBoostClassifier(random_state=7).fit(X, y)  # an unrelated fit in between
    kept.fit(X[100:300], y[100:300])
    XGBoostClassifier(random_state=8).fit(X[:50], y[:50])
    restored.fit(X[100:300], y[100:300])
    np.testing.assert_array_equal(kept.predict_proba(X), restored.predict_proba(X))


def test_xgboost_continuation_learns_a_class_missing_from_the_first_fit(xgb):
    X, y = load_iris(return_X_y=True)
    clf = XGBoostClassifier(n_estimators=20, classes=[0, 1, 2], random_state=0)
    clf.fit(X[y < 2], y[y < 2]).fit(X, y)  # 10 continued rounds on all classes
    assert (clf.predict(X) == y).mean() > 0.9


def test_xgboost_sample_weight(xgb):
    X, y = _blobs(seed=2)
    X = X + np.random.default_rng(0).normal(scale=3.0, size=X.shape)  # overlapping classes
    plain = XGBoostClassifier(n_estimators=10, random_state=0).fit(X, y)
    w = np.where(y == 2, 10.0, 1.0)
    weighted = XGBoostClassifier(n_estimators=10, random_state=0).fit(X, y, sample_weight=w)
    assert weighted.predict_proba(X)[:, 2].mean() > plain.predict_proba(X)[:, 2].mean() + 0.05


def test_xgboost_errors(xgb):
    X, y = _blobs()
    with pytest.raises(ValueError, match="not in classes"):
        XGBoostClassifier(n_estimators=2, classes=[0, 1]).fit(X, y)
    clf = XGBoostClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="classes changed"):
        clf.fit(X[y < 2], y[y < 2])
    with pytest.raises(ValueError, match="features"):
        clf.fit(np.c_[X, X], y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(np.c_[X, X])
    assert clf.booster_.num_boosted_rounds() == 2  # failed fits left the model alone
    with pytest.raises(ValueError, match="num_class"):
        XGBoostClassifier(params={"num_class": 4}).fit(X, y)
    with pytest.raises(ValueError, match="n_estimators"):
        XGBoostClassifier(n_estimators=0).fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        XGBoostClassifier().fit(X, np.zeros(y.size))


def test_xgboost_clone_and_pickle(xgb):
    X, y = _blobs()
    clf = XGBoostClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params() and not hasattr(twin, "booster_")
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))


# ------------------------------------------------------------------------ RuleFitClassifier


def _penalty_warnings(record):
    return [w for w in record if "penalty" in str(w.message)]


@pytest.fixture(scope="module")
def breast_cancer_rulefit():
    pytest.importorskip("imodels")
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=85, test_size=114, random_state=0, stratify=y
    )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        clf = RuleFitClassifier(random_state=0).fit(X_tr, y_tr)
    return clf, X_te, y_te, record


@pytest.fixture(scope="module")
def iris_rulefit():
    pytest.importorskip("imodels")
    X, y = load_iris(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, train_size=60, test_size=90, random_state=0, stratify=y
    )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        clf = RuleFitClassifier(random_state=0).fit(X_tr, y_tr)
    return clf, X_te, y_te, record


@pytest.mark.slow
def test_rulefit_binary_accuracy_and_no_warning_flood(breast_cancer_rulefit):
    clf, X_te, y_te, record = breast_cancer_rulefit
    assert (clf.predict(X_te) == y_te.to_numpy()).mean() >= 0.88  # 0.92 measured
    assert len(clf.estimators_) == 1 and clf.estimator_classes_.tolist() == [1]
    proba = clf.predict_proba(X_te)
    assert proba.shape == (len(y_te), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert _penalty_warnings(record) == []


def test_rulefit_get_rules(breast_cancer_rulefit):
    clf = breast_cancer_rulefit[0]
    rules = clf.get_rules()
    assert rules.columns.tolist() == ["class", "rule", "type", "coef", "support", "importance"]
    assert len(rules) > 0 and (rules["coef"] != 0).all()
    assert set(rules["type"]) <= {"rule", "linear"} and set(rules["class"]) == {1}
    assert rules["rule"].str.contains("mean radius|worst|error|mean").any()  # frame column names
    assert len(clf.get_rules(exclude_zero_coef=False)) >= len(rules)


def test_rulefit_rules_evaluated_with_numpy_match_imodels_exactly(breast_cancer_rulefit):
    """The numpy rule sum gives imodels' own linear output bit for bit (its pandas queries
    cost about 0.8 s a call)."""
    from learners.rulefit import _decision

    clf, X_te = breast_cancer_rulefit[:2]
    X = np.asarray(X_te, dtype=np.float64)
    (inner,) = clf.estimators_
    expected = np.asarray(inner._predict_continuous_output(X), dtype=np.float64)
    np.testing.assert_array_equal(_decision(inner, X), expected)
    with pytest.raises(ValueError, match="NaN"):
        _decision(inner, np.where(np.eye(len(X), X.shape[1]) > 0, np.nan, X))


def test_rulefit_rule_terms_numpy_cannot_read_go_to_imodels():
    from types import SimpleNamespace

    from learners.rulefit import _decision

    rule = SimpleNamespace(agg_dict={("X_0", "<="): "X_1"}, args=(1.0,))  # not "op number"
    model = SimpleNamespace(
        feature_placeholders=np.array(["X_0", "X_1"]),
        rules_without_feature_names_=[rule],
        _predict_continuous_output=lambda X: np.full(len(X), 7.0),
    )
    np.testing.assert_array_equal(_decision(model, np.zeros((3, 2))), [7.0, 7.0, 7.0])


@pytest.mark.slow
def test_rulefit_multiclass_one_vs_rest(iris_rulefit):
    clf, X_te, y_te, record = iris_rulefit
    assert (clf.predict(X_te) == y_te).mean() >= 0.85  # 0.91 measured
    assert len(clf.estimators_) == 3
    proba = clf.predict_proba(X_te)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X_te))
    assert set(clf.get_rules()["class"]) == {0, 1, 2}
    assert _penalty_warnings(record) == []


def test_rulefit_missing_and_single_class_and_global_rng():
    pytest.importorskip("imodels")
    X, y = load_iris(return_X_y=True)
    keep = y < 2
    before = np.random.get_state()  # noqa: NPY002 (numpy's legacy global RNG is under test)
    clf = RuleFitClassifier(n_estimators=20, max_rules=20, classes=[0, 1, 2, 3], random_state=0)
    clf.fit(X[keep], y[keep])
    after = np.random.get_state()  # noqa: NPY002
    np.testing.assert_array_equal(after[1], before[1])  # imodels' np.random.seed was undone
    assert after[2:] == before[2:]
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), 4)
    np.testing.assert_array_equal(proba[:, 2:], 0.0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (clf.predict(X[keep]) == y[keep]).mean() > 0.95

    single = RuleFitClassifier(classes=[0, 1, 2]).fit(X[:10], y[:10])
    np.testing.assert_array_equal(single.predict_proba(X[:2]), [[1, 0, 0], [1, 0, 0]])
    assert single.estimators_ == [] and single.get_rules().empty
    with pytest.raises(ValueError, match="not in classes"):
        RuleFitClassifier(classes=[0, 1]).fit(X, y)


def test_rulefit_in_wrapper_reduces_soft_targets_to_hard_labels():
    pytest.importorskip("imodels")
    X, y = _blobs(n_per_class=10, n_classes=2)
    clf = ClassAlignedClassifier(RuleFitClassifier(n_estimators=10, random_state=0), classes=[0, 1])
    with pytest.warns(UserWarning, match="reduced to hard labels"):
        clf.fit(X, np.eye(2)[y] * 0.6 + 0.2)
    assert clf.estimator_.classes_.tolist() == [0, 1]
    assert (clf.predict(X) == y).mean() > 0.9


# ------------------------------------------------------------------------------- imports


@pytest.mark.slow
def test_import_learners_does_not_import_heavy_libraries():
    code = (
        "import learners, sys; "
        "assert 'xgboost' not in sys.modules and 'imodels' not in sys.modules, "
        "[m for m in ('xgboost', 'imodels') if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
