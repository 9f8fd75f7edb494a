"""Missing values: a client whose learner handles NaN natively gets its rows as
they are; NaN is refused, clearly, only where a learner that sees the data cannot take it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer


def with_holes(cancer, share=0.2, seed=0):
    """The cancer split with ``share`` of every feature array's cells set to NaN."""
    rng = np.random.default_rng(seed)

    def holes(X):
        X = X.copy()
        X[rng.random(X.shape) < share] = np.nan
        return X

    return {
        **cancer,
        "X": [holes(X) for X in cancer["X"]],
        "X_public": holes(cancer["X_public"]),
        "X_test": holes(cancer["X_test"]),
    }


def fit(data, estimators, **params):
    return FederatedCoTrainer(estimators, rounds=3, random_state=0, trust=None, **params).fit(
        data["X"], data["y"], X_public=data["X_public"],
        eval_set=(data["X_test"], data["y_test"]), y_public=data["y_public"],
    )  # fmt: skip


def hgb():
    return HistGradientBoostingClassifier(max_iter=30, min_samples_leaf=3, random_state=0)


def test_learners_that_handle_nan_train_on_it(cancer):
    data = with_holes(cancer)
    trainer = fit(data, [hgb(), hgb(), hgb()])
    # 20% of every cell missing, everywhere: still well above chance (0.63 majority class)
    assert trainer.score(data["X_test"], data["y_test"]) > 0.85
    assert trainer.history_[-1].pseudo_label_accuracy > 0.83  # measured 0.877


def test_xgboost_clients_take_nan(cancer):
    pytest.importorskip("xgboost")
    from learners import XGBoostClassifier

    data = with_holes(cancer)
    xgb = XGBoostClassifier(n_estimators=20, max_depth=3, random_state=0)
    trainer = fit(data, [xgb, hgb(), xgb])
    assert trainer.score(data["X_test"], data["y_test"]) > 0.85


def test_mixed_federation_decides_per_client(cancer):
    """A client whose learner refuses NaN may still join if its own rows are complete; the
    public pool and evaluation set, which every client labels, must then be complete."""
    data = with_holes(cancer)
    complete = {**data, "X": [data["X"][0], data["X"][1], cancer["X"][2]],
                "X_public": cancer["X_public"], "X_test": cancer["X_test"]}  # fmt: skip
    trainer = fit(complete, [hgb(), hgb(), LogisticRegression(max_iter=1000)])
    assert trainer.score(cancer["X_test"], cancer["y_test"]) > 0.85
    with pytest.raises(ValueError, match=r"X contains NaN.*client 2 \(LogisticRegression\)"):
        trainer.predict(data["X_test"])
    # client 2's own rows with holes: refused, naming it and what to do
    holes = {**complete, "X": data["X"]}
    with pytest.raises(ValueError, match=r"X\[2\] \(client 2\) contains NaN.*LogisticRegression"):
        fit(holes, [hgb(), hgb(), LogisticRegression(max_iter=1000)])
    # a public pool with holes: refused because client 2's learner would label it
    with pytest.raises(ValueError, match=r"X_public contains NaN.*client 2 \(Logistic.*impute"):
        fit({**complete, "X_public": data["X_public"]},
            [hgb(), hgb(), LogisticRegression(max_iter=1000)])  # fmt: skip


def test_an_imputing_pipeline_client_takes_nan(cancer):
    data = with_holes(cancer)
    imputing = make_pipeline(SimpleImputer(), DecisionTreeClassifier(random_state=0))
    trainer = fit(data, [imputing, hgb(), imputing])
    assert trainer.score(data["X_test"], data["y_test"]) > 0.85


def test_a_pipeline_is_judged_step_by_step(cancer):
    """StandardScaler takes NaN but keeps it: a scaler then a logistic regression cannot
    take holes, and is refused before training, naming the client; an imputer anywhere
    before the regression makes the same pipeline take them."""
    data = with_holes(cancer)
    keeps_nan = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    with pytest.raises(ValueError, match=r"X_public contains NaN.*client 1 \(Pipeline\)"):
        fit(data, [hgb(), keeps_nan, hgb()])
    imputing = make_pipeline(StandardScaler(), SimpleImputer(), LogisticRegression(max_iter=1000))
    trainer = fit(data, [hgb(), imputing, hgb()])
    assert trainer.score(data["X_test"], data["y_test"]) > 0.85


def test_infinity_is_refused_even_for_nan_learners(cancer):
    data = with_holes(cancer)
    data["X_public"][0, 0] = np.inf
    with pytest.raises(ValueError, match=r"X_public.*infinity"):
        fit(data, [hgb(), hgb(), hgb()])


@pytest.mark.parametrize("trust", [None, "auto"])
def test_predict_and_score_take_nan_where_fit_did_for_every_trust(cancer, trust):
    """Under the default trust a client predicts with a blend of its models: it takes NaN
    when its learner does (issue 41: fit accepted NaN, predict refused it)."""
    data = with_holes(cancer)
    imputing = make_pipeline(SimpleImputer(), LogisticRegression())
    estimators = [DecisionTreeClassifier(), imputing, HistGradientBoostingClassifier()]
    trainer = FederatedCoTrainer(estimators, rounds=2, random_state=0, trust=trust)
    trainer.fit(data["X"], data["y"], X_public=data["X_public"])
    assert trainer.score(data["X_test"], data["y_test"]) > 0.8
    assert np.isfinite(trainer.predict_proba(data["X_test"])).all()


def test_local_only_and_centralized_take_nan_and_name_a_refusing_learner(cancer):
    from cotrain.baselines import Centralized, LocalOnly

    data = with_holes(cancer)
    test = (data["X_test"], data["y_test"])
    imputing = make_pipeline(SimpleImputer(), LogisticRegression())
    local = LocalOnly([DecisionTreeClassifier(), imputing, DecisionTreeClassifier()])
    assert local.fit(data["X"], data["y"], eval_set=test).score(*test) > 0.8
    central = Centralized(DecisionTreeClassifier(), random_state=0)
    assert central.fit(data["X"], data["y"], eval_set=test).score(*test) > 0.8
    refusing = LocalOnly([DecisionTreeClassifier(), LogisticRegression(), DecisionTreeClassifier()])
    with pytest.raises(ValueError, match=r"client 1\) contains NaN .* its learner \(Logistic"):
        refusing.fit(data["X"], data["y"])
