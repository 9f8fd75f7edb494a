"""PoolHalvesTrust: two continuing models, each on one fixed half of U, each labelling the
other half — no label a site sends comes from a model that saw that row's pseudo-label."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from cotrain import FederatedCoTrainer
from cotrain.trust import client_trust, get_trust
from cotrain.trust.pool_halves import PoolHalvesTrust, pool_halves
from learners.blend import BlendedClassifier

PUBLIC_ID = 1000  # the pool's rows carry ids from here in their only feature


class RowRecorder(ClassifierMixin, BaseEstimator):
    """Remembers the ids (the one feature) of every row it was ever fitted on and predicts
    class 1 for a row it saw with label 1, else class 0 (a model that memorises)."""

    def fit(self, X, y):
        seen = dict(getattr(self, "seen_", {}))
        seen.update(zip(X[:, 0].astype(int).tolist(), np.asarray(y).tolist(), strict=True))
        self.seen_, self.classes_ = seen, np.array([0, 1])
        return self

    def predict_proba(self, X):
        ones = np.array([self.seen_.get(int(i), 0) == 1 for i in X[:, 0]], dtype=float)
        return np.column_stack([1 - ones, ones])

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def ids(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype=float)[:, None]


def test_halves_are_balanced_and_seeded() -> None:
    half = pool_halves(11, random_state=3)
    assert sorted(np.bincount(half).tolist()) == [5, 6]
    np.testing.assert_array_equal(half, pool_halves(11, random_state=3))
    assert not np.array_equal(pool_halves(40, 0), pool_halves(40, 1))


def test_each_model_trains_on_its_half_and_labels_the_other() -> None:
    X, y, U = ids(6), np.array([0, 1, 0, 1, 0, 1]), ids(10, PUBLIC_ID)
    trust, state, classes = PoolHalvesTrust(random_state=0), {}, np.array([0, 1])
    first = trust.fit_round(RowRecorder(), X, y, U, None, classes, state)
    np.testing.assert_array_equal(first.on_public[:, 1], 0)  # round 1: it saw no pool row
    assert (first.alpha, first.quality) == (1.0, None)
    pseudo = np.ones(10, dtype=int)  # the consensus says 1 everywhere
    pseudo[7] = -1  # ... and abstains on one row
    later = trust.fit_round(RowRecorder(), X, y, U, pseudo, classes, state)
    half = state["half"]
    for k, model in enumerate(state["models"]):
        seen = set(model.estimator_.seen_)
        assert set(range(6)) <= seen  # every private row
        pool = {i - PUBLIC_ID for i in seen if i >= PUBLIC_ID}
        assert pool == {i for i in range(10) if half[i] == k and i != 7}
    # a memorising model trained on "1" for its half sends 0 for the other half: every sent
    # label is from the model that never saw that row's pseudo-label
    np.testing.assert_array_equal(later.on_public[:, 1], 0)
    # the site predicts with the mean of both: 0.5 on the labelled pool rows, 0 on row 7
    proba = later.model.predict_proba(U)[:, 1]
    np.testing.assert_allclose(proba, np.where(np.arange(10) == 7, 0.0, 0.5))


def test_a_soft_consensus_trains_on_the_rows_it_labelled() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    U = rng.normal(size=(30, 2))
    soft = np.column_stack([U[:, 0] < 0, U[:, 0] >= 0]).astype(float)
    soft[:3] = np.nan  # abstentions
    trust, state, classes = PoolHalvesTrust(random_state=1), {}, np.array([0, 1])
    trust.fit_round(LogisticRegression(), X, y, U, None, classes, state)
    out = trust.fit_round(LogisticRegression(), X, y, U, soft, classes, state)
    assert out.on_public.shape == (30, 2)
    np.testing.assert_allclose(out.on_public.sum(axis=1), 1.0)
    assert isinstance(out.model, BlendedClassifier) and len(out.model.cotrained) == 2


def federation(trust, rounds: int = 4, resume: bool = False, **kwargs) -> FederatedCoTrainer:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.8, size=400) > 0).astype(int)
    parts = np.array_split(np.arange(90), 3)
    learners = [KNeighborsClassifier(1), KNeighborsClassifier(1), LogisticRegression()]
    trainer = FederatedCoTrainer(
        learners, rounds=rounds, trust=trust, consensus="majority", random_state=0, **kwargs
    )
    return trainer.fit(
        [X[p] for p in parts],
        [y[p] for p in parts],
        X_public=X[100:300],
        y_public=y[100:300],
        eval_set=(X[300:], y[300:]),
        resume=resume,
    )


def test_the_consensus_keeps_moving_where_fedct_locks_in() -> None:
    fedct = federation(None)
    halves = federation(PoolHalvesTrust())
    # a 1-NN site under FedCT sends back the pseudo-labels it memorised (a pool row's
    # nearest neighbour is itself): two of three sites do, so the majority never changes
    assert [r.changed for r in fedct.history_[1:]] == [0, 0, 0]
    assert all(r.changed > 0 for r in halves.history_[1:])
    assert all(isinstance(m, BlendedClassifier) for m in halves.clients_)
    assert all(r.quality == {} for r in halves.history_)  # no held-out rows: no quality


def test_a_resumed_run_continues_as_an_uninterrupted_one(tmp_path) -> None:
    whole = federation(PoolHalvesTrust(), rounds=3)
    federation(PoolHalvesTrust(), rounds=1, checkpoint_dir=tmp_path)
    resumed = federation(PoolHalvesTrust(), rounds=3, resume=True, checkpoint_dir=tmp_path)
    assert [r.changed for r in resumed.history_] == [r.changed for r in whole.history_]
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, whole.pseudo_label_codes_)
    X_test = np.random.default_rng(5).normal(size=(50, 4))
    np.testing.assert_array_equal(resumed.predict_proba(X_test), whole.predict_proba(X_test))


def test_it_is_refused_beside_a_privacy_mechanism_and_checked() -> None:
    from cotrain.privacy import RandomizedResponse

    with pytest.raises(ValueError, match="PoolHalvesTrust cannot be combined"):
        client_trust(PoolHalvesTrust(), RandomizedResponse(epsilon=2.0), 0)
    with pytest.raises(ValueError, match="random_state must be None or an int"):
        get_trust(PoolHalvesTrust(random_state=1.5))
    assert get_trust(PoolHalvesTrust(), random_state=7).random_state == 7
    assert PoolHalvesTrust().fits_per_round == 2
