"""Malformed inputs raise a clear ValueError/TypeError naming the problem, before training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer


class NeverFit(DecisionTreeClassifier):
    """Fails the test if training starts: validation must come first."""

    def fit(self, *args, **kwargs):
        raise AssertionError("training started before validation finished")

    def __sklearn_tags__(self):
        # stands for a learner without NaN support (trees take NaN natively since
        # scikit-learn 1.3, and the trainer lets a learner that takes NaN have it)
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def good():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(20, 4)) for _ in range(3)]
    y = [np.array([0, 1] * 10) for _ in range(3)]
    return X, y, rng.normal(size=(30, 4))


def trainer(**params):
    return FederatedCoTrainer([NeverFit() for _ in range(3)], **params)


def with_client(index, X=None, y=None):
    Xs, ys, U = good()
    if X is not None:
        Xs[index] = X
    if y is not None:
        ys[index] = y
    return Xs, ys, U


CASES = {
    "feature count differs between clients": (
        {},
        lambda: with_client(1, X=np.zeros((20, 5))),
        ValueError,
        r"X\[1\] \(client 1\) has 5 features",
    ),
    "feature count differs from public pool": (
        {},
        lambda: (*good()[:2], np.zeros((30, 3))),
        ValueError,
        "X_public has 3",
    ),
    "NaN in client features": (
        {},
        lambda: with_client(2, X=np.full((20, 4), np.nan)),
        ValueError,
        r"X\[2\].*NaN",
    ),
    "inf in public pool": (
        {},
        lambda: (*good()[:2], np.full((30, 4), np.inf)),
        ValueError,
        "X_public.*infinity",
    ),
    "empty client": (
        {},
        lambda: with_client(0, X=np.zeros((0, 4)), y=np.array([])),
        ValueError,
        "client 0 has no training data",
    ),
    "labels length differs from rows": (
        {},
        lambda: with_client(1, y=np.array([0, 1])),
        ValueError,
        r"y\[1\].*2 labels.*20 rows",
    ),
    "labels of different types across clients": (
        {},
        lambda: with_client(2, y=np.array(["a", "b"] * 10)),
        TypeError,
        "labels of different types",
    ),
    "mixed label types within a client": (
        {},
        lambda: with_client(0, y=np.array([0, "b"] * 10, dtype=object)),
        TypeError,
        "mixes label types",
    ),
    "NaN labels": ({}, lambda: with_client(0, y=np.array([0.0, np.nan] * 10)), ValueError, "NaN"),
    "2-D labels": ({}, lambda: with_client(0, y=np.zeros((20, 2))), ValueError, "must be 1-D"),
    "public pool 1-D": ({}, lambda: (*good()[:2], np.zeros(30)), ValueError, "X_public.*2D"),
    "public pool empty": ({}, lambda: (*good()[:2], np.zeros((0, 4))), ValueError, "X_public"),
    "public pool missing": ({}, lambda: (*good()[:2], None), TypeError, "X_public is required"),
    "non-numeric features": (
        {},
        lambda: with_client(0, X=np.array([["a"] * 4] * 20)),
        ValueError,
        r"X\[0\]",
    ),
    "fewer clients than estimators": (
        {},
        lambda: (good()[0][:2], good()[1][:2], good()[2]),
        ValueError,
        "estimators has 3 entries but the data has 2 clients",
    ),
    "X and y client counts differ": (
        {},
        lambda: (good()[0], good()[1][:2], good()[2]),
        ValueError,
        "X has 3 clients but y has 2",
    ),
    "X not a list": (
        {},
        lambda: (np.zeros((20, 4)), good()[1], good()[2]),
        TypeError,
        "without groups",
    ),
    "single class overall": (
        {},
        lambda: (good()[0], [np.zeros(20)] * 3, good()[2]),
        ValueError,
        "at least 2 classes",
    ),
    "unknown consensus name": ({"consensus": "plurality"}, good, ValueError, "plurality"),
    "quorum outside (0, 1]": (
        {"consensus": "qualified_majority"},
        good,
        None,
        None,
    ),  # placeholder, replaced below
    "rounds < 1": ({"rounds": 0}, good, ValueError, "rounds must be >= 1"),
    "rounds not an integer": ({"rounds": 2.5}, good, TypeError, "rounds must be an integer"),
    "participation 0": ({"participation": 0.0}, good, ValueError, "participation"),
    "participation above 1": ({"participation": 1.5}, good, ValueError, "participation"),
    "unknown share": ({"share": "logits"}, good, ValueError, "share must be 'hard' or 'soft'"),
    "unknown soft_dtype": ({"soft_dtype": "int8"}, good, ValueError, "soft_dtype must be"),
    "unknown on_client_error": ({"on_client_error": "ignore"}, good, ValueError, "on_client_error"),
    "early_stopping 0": ({"early_stopping": 0}, good, ValueError, "early_stopping must be >= 1"),
    "min_clients above clients": ({"min_clients": 4}, good, ValueError, "min_clients=4 exceeds"),
    "n_jobs 0": ({"n_jobs": 0}, good, ValueError, "n_jobs"),
    "negative verbose": ({"verbose": -1}, good, ValueError, "verbose"),
    "unknown encoding": ({"encoding": "gzip"}, good, ValueError, "encoding must be"),
    "soft_bits 0": ({"soft_bits": 0}, good, ValueError, "soft_bits must be >= 1"),
    "soft_bits 17": ({"soft_bits": 17}, good, ValueError, "soft_bits must be <= 16"),
    "round_timeout 0": ({"round_timeout": 0}, good, ValueError, "round_timeout must be"),
    "unknown runtime": ({"runtime": "dask"}, good, ValueError, "runtime must be"),
    "random_state a string": ({"random_state": "seed"}, good, TypeError, "random_state"),
    "labels outside given classes": (
        {"classes": [0, 2]},
        good,
        ValueError,
        "not listed in classes",
    ),
    "duplicate classes": ({"classes": [0, 1, 1]}, good, ValueError, "duplicates"),
}
del CASES["quorum outside (0, 1]"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_input_is_refused_before_training(name):
    params, make, error, match = CASES[name]
    X, y, U = make()
    with pytest.raises(error, match=match):
        trainer(**params).fit(X, y, X_public=U)


@pytest.mark.parametrize("quorum", [0.0, -0.5, 1.01])
def test_quorum_outside_unit_interval(quorum):
    from consensus import QualifiedMajority

    X, y, U = good()
    with pytest.raises(ValueError, match="quorum"):
        trainer(consensus=QualifiedMajority(quorum=quorum)).fit(X, y, X_public=U)


def test_estimator_without_fit():
    X, y, U = good()
    with pytest.raises(TypeError, match=r"estimators\[1\] \(str\) has no fit"):
        FederatedCoTrainer([NeverFit(), "tree", NeverFit()]).fit(X, y, X_public=U)


def test_soft_sharing_needs_predict_proba():
    from sklearn.svm import SVC

    X, y, U = good()
    with pytest.raises(TypeError, match=r"estimators\[0\] \(SVC\) has no predict_proba"):
        FederatedCoTrainer([SVC(), NeverFit(), NeverFit()], share="soft").fit(X, y, X_public=U)


def test_eval_set_with_wrong_feature_count():
    X, y, U = good()
    with pytest.raises(ValueError, match="eval_set"):
        trainer().fit(X, y, X_public=U, eval_set=(np.zeros((5, 3)), np.zeros(5)))


def test_y_public_with_wrong_length():
    X, y, U = good()
    with pytest.raises(ValueError, match="y_public has 5 labels but its features have 30 rows"):
        trainer().fit(X, y, X_public=U, y_public=np.zeros(5))


def test_groups_with_wrong_length():
    X, y, U = good()
    with pytest.raises(ValueError, match="groups must be 1-D with one entry per row"):
        trainer().fit(np.concatenate(X), np.concatenate(y), groups=np.zeros(3), X_public=U)


def test_predict_with_wrong_feature_count():
    X, y, U = good()
    fitted = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=1).fit(X, y, X_public=U)
    with pytest.raises(ValueError, match="X has 2 features, expected 4"):
        fitted.predict(np.zeros((3, 2)))


def test_predict_before_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        FederatedCoTrainer([DecisionTreeClassifier()]).predict(np.zeros((1, 4)))


# ------------------------------------------------------------------------- small items
@pytest.mark.parametrize("name", ["X_public", "X[1] (client 1)", "eval_set[0] (X_eval)"])
def test_one_dimensional_features_give_a_one_line_error(name):
    X, y, U = good()
    eval_set = None
    if name == "X_public":
        U = np.linspace(0, 1, 300)
    elif name.startswith("X[1]"):
        X[1] = np.linspace(0, 1, 20)
    else:
        eval_set = (np.linspace(0, 1, 300), np.zeros(300))
    with pytest.raises(ValueError) as err:
        trainer().fit(X, y, X_public=U, eval_set=eval_set)
    message = str(err.value)
    assert message.startswith(f"{name} must be a 2D array")
    assert "reshape(-1, 1)" in message
    assert "\n" not in message and len(message) < 250  # not the whole array (was 2,628 chars)


def test_eval_labels_never_seen_in_training_warn():
    X, y, U = good()
    fitted = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=1)
    with pytest.warns(UserWarning, match=r"eval_set\[1\] \(y_eval\) has 5 of 10 labels never "):
        fitted.fit(X, y, X_public=U, eval_set=(U[:10], np.array([0, 7] * 5)))
    assert fitted.history_[-1].consensus_accuracy <= 0.5  # the 7s can never be right
    with pytest.warns(UserWarning, match=r"y_public has 30 of 30 labels never seen.*\[5\]"):
        fitted.fit(X, y, X_public=U, y_public=np.full(30, 5))


def test_a_regressor_client_is_refused_before_training():
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, U = good()
    with pytest.raises(TypeError, match=r"estimators\[1\] \(LinearRegression\) is a regressor"):
        FederatedCoTrainer([NeverFit(), LinearRegression(), NeverFit()]).fit(X, y, X_public=U)
    regression_pipeline = make_pipeline(StandardScaler(), LinearRegression())
    with pytest.raises(TypeError, match=r"estimators\[0\] \(Pipeline\) is a regressor"):
        FederatedCoTrainer([regression_pipeline, NeverFit(), NeverFit()]).fit(X, y, X_public=U)


def test_continuous_labels_are_refused_before_training():
    X, y, U = good()
    y[2] = np.linspace(0.05, 3.0, 20)
    with pytest.raises(
        ValueError, match=r"y\[2\] \(client 2\) holds continuous values \(e.g. 0.05"
    ):
        trainer().fit(X, y, X_public=U)
    # whole numbers stored as floats are class labels
    X, y, U = good()
    fitted = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=1)
    fitted.fit(X, [yi.astype(float) for yi in y], X_public=U)
    assert fitted.classes_.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("consensus", ["mean", "entropy"])
def test_soft_consensus_with_hard_sharing_says_what_it_does(consensus):
    X, y, U = good()
    trees = [DecisionTreeClassifier(random_state=i) for i in range(3)]
    fitted = FederatedCoTrainer(trees, consensus=consensus, share="hard", rounds=1, trust=None)
    with pytest.warns(UserWarning, match=r"share='hard'.*share of the clients' votes"):
        fitted.fit(X, y, X_public=U)
    # what it does: the targets are the vote shares (thirds with three clients)
    votes = np.stack([c.predict(U) for c in fitted.clients_])
    shares = np.stack([(votes == k).mean(axis=0) for k in (0, 1)], axis=1)
    np.testing.assert_allclose(fitted.pseudo_labels_, shares, atol=1e-6)


def test_a_stray_label_class_is_named_with_its_client_once():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(15, 3)) for _ in range(2)]
    y = [np.array(["yes"] * 7 + ["no"] * 8), np.array(["yes"] * 7 + ["no"] * 7 + ["yes "])]
    trainer = FederatedCoTrainer([DecisionTreeClassifier(), DecisionTreeClassifier()], rounds=1)
    with pytest.warns(
        UserWarning, match=r"y\[1\] \(client 1\) has the only row of class 'yes ' among 30"
    ):
        trainer.fit(X, y, X_public=rng.normal(size=(20, 3)))
    # the label space given: a class with one row is meant, no warning
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*only row of class")
        FederatedCoTrainer(
            [DecisionTreeClassifier(), DecisionTreeClassifier()], rounds=1,
            classes=["no", "yes", "yes "],
        ).fit(X, y, X_public=rng.normal(size=(20, 3)))  # fmt: skip
