"""Cross-fitted co-training (the default ``trust="auto"``; issue 28, its whole-pool labels
issue 40), the reliability-weighted vote and the blended site predictor."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from consensus import DawidSkene, ReliabilityVote, get_consensus, reliability_vote
from cotrain import FederatedCoTrainer
from cotrain.trust import FixedTrust, PseudoLabelTrust, client_trust, get_trust
from cotrain.trust.cross_fit import CrossFitTrust, pick_alpha
from learners import BlendedClassifier, ClassAlignedClassifier
from learners.blend import blend_proba

CLASSES = np.array([0, 1])


def _task(seed: int = 0, n: int = 80, n_public: int = 300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    U = rng.normal(size=(n_public, 2))
    return X, (X[:, 0] > 0).astype(int), U, (U[:, 0] > 0).astype(int)


# ------------------------------------------------------------------- pick_alpha
def test_pick_alpha_hand_computed() -> None:
    y = np.array([0, 1, 0, 1])
    local = np.array([[0.6, 0.4], [0.4, 0.6], [0.6, 0.4], [0.6, 0.4]])  # 3 of 4 right
    co = np.array([[0.9, 0.1], [0.1, 0.9], [0.9, 0.1], [0.1, 0.9]])  # all right
    # Brier per row of a * co + (1 - a) * local; at a = 1: 0.02 each; a = 0: 0.32 x3, 0.72
    assert pick_alpha(co, local, y, (0.0, 1.0), z=0.0) == 1.0
    # the difference (0.30, 0.30, 0.30, 0.70) has mean 0.40 and se 0.10: within 5 se of
    # the best, so the site keeps its own model
    assert pick_alpha(co, local, y, (0.0, 1.0), z=5.0) == 0.0
    assert pick_alpha(co, local, y, (0.0, 1.0), z=3.9) == 1.0


def test_pick_alpha_prefer_resolves_noise_either_way() -> None:
    # the same rows as above: the difference is 0.40 with se 0.10, so within z = 5 standard
    # errors either weight qualifies, and prefer picks which
    y = np.array([0, 1, 0, 1])
    local = np.array([[0.6, 0.4], [0.4, 0.6], [0.6, 0.4], [0.6, 0.4]])
    co = np.array([[0.9, 0.1], [0.1, 0.9], [0.9, 0.1], [0.1, 0.9]])
    assert pick_alpha(co, local, y, (0.0, 1.0), z=5.0, prefer="cotrained") == 1.0
    assert pick_alpha(local, co, y, (0.0, 1.0), z=5.0, prefer="cotrained") == 1.0
    assert pick_alpha(local, co, y, (0.0, 1.0), z=3.9, prefer="cotrained") == 0.0
    assert pick_alpha(local, co, y, (0.0, 1.0), z=3.9, prefer="local") == 0.0


def test_pick_alpha_prefers_local_on_ties() -> None:
    y = np.array([0, 1])
    same = np.array([[0.8, 0.2], [0.2, 0.8]])
    assert pick_alpha(same, same, y, (0.0, 0.5, 1.0), z=0.0) == 0.0


# ------------------------------------------------------------------- CrossFitTrust
def test_round_one_sends_the_local_model_labels() -> None:
    X, y, U, _ = _task()
    state: dict = {}
    out = CrossFitTrust(random_state=0).fit_round(
        LogisticRegression(), X, y, U, None, CLASSES, state
    )
    expected = LogisticRegression().fit(X, y).predict_proba(U)
    np.testing.assert_allclose(out.on_public, expected)
    assert out.alpha == 0.0 and len(out.model.cotrained) == 0
    assert 0.9 <= out.quality <= 1.0  # 5-fold out-of-fold accuracy of a separable task


def test_cross_fit_labels_on_the_pool_are_not_fitted_to_themselves() -> None:
    """A 1-nearest-neighbour model fitted on a row returns that row's label: a client
    that sent labels from its own fit would echo random pseudo-labels back exactly."""
    X, y, U, _ = _task(1)
    noise = np.random.default_rng(5).integers(0, 2, size=len(U))
    state: dict = {}
    trust = CrossFitTrust(pool="cross_fit", random_state=0)
    knn = KNeighborsClassifier(n_neighbors=1)
    out = trust.fit_round(knn, X, y, U, noise, CLASSES, state)
    echoed = np.mean(out.on_public.argmax(axis=1) == noise)
    in_sample = ClassAlignedClassifier(knn, classes=CLASSES).fit(np.r_[X, U], np.r_[y, noise])
    assert np.mean(in_sample.predict(U) == noise) == 1.0
    assert 0.35 < echoed < 0.65  # chance agreement with labels the models never saw
    # each pool fold is labelled by the one model that did not see it
    folds = state["u_fold"]
    for k, model in enumerate(state["folds"]):
        np.testing.assert_allclose(out.on_public[folds == k], model.predict_proba(U[folds == k]))


def test_whole_pool_models_train_on_every_pool_row_and_send_their_mean() -> None:
    """``pool="whole"`` (the default): both models see the whole pool, as FedCT's one model
    does, so a 1-nearest-neighbour site echoes the pseudo-labels it was given; its
    quality is still measured on the private rows each model left out."""
    X, y, U, _ = _task(1)
    noise = np.random.default_rng(5).integers(0, 2, size=len(U))
    state: dict = {}
    trust = CrossFitTrust(random_state=0)
    assert trust.pool == "whole"
    knn = KNeighborsClassifier(n_neighbors=1)
    out = trust.fit_round(knn, X, y, U, noise, CLASSES, state)
    models = state["folds"]
    mean = np.mean([m.predict_proba(U) for m in models], axis=0)
    np.testing.assert_allclose(out.on_public, mean)
    assert np.mean(out.on_public.argmax(axis=1) == noise) == 1.0
    fold = state["d_fold"]
    oof = np.empty(len(y), dtype=np.int64)
    for k, model in enumerate(models):
        oof[fold == k] = model.predict(X[fold == k])
        # each model trained on its own rows outside fold k and all 300 pool rows
        assert model.estimator_.n_samples_fit_ == np.sum(fold != k) + len(U)
    assert out.quality == np.mean(oof == y)


def test_refit_one_refits_the_round_s_model_and_keeps_the_other() -> None:
    """``refit="one"`` (the default): the first co-training round fits both models; round
    ``t`` then refits model ``t mod 2`` only, the other keeps its fit, and the labels sent
    are still the mean of both."""
    X, y, U, truth = _task(11)
    trust = CrossFitTrust(random_state=0)
    state: dict = {"round": 1}
    trust.fit_round(LogisticRegression(), X, y, U, None, CLASSES, state)
    state["round"] = 2
    trust.fit_round(LogisticRegression(), X, y, U, truth, CLASSES, state)
    before = [m.estimator_.coef_.copy() for m in state["folds"]]
    state["round"] = 3
    flipped = 1 - truth
    out = trust.fit_round(LogisticRegression(), X, y, U, flipped, CLASSES, state)
    after = [m.estimator_.coef_ for m in state["folds"]]
    np.testing.assert_array_equal(after[0], before[0])  # 3 mod 2 = 1: model 0 kept
    assert not np.allclose(after[1], before[1])  # model 1 refitted on the flipped pool
    mean = np.mean([m.predict_proba(U) for m in state["folds"]], axis=0)
    np.testing.assert_allclose(out.on_public, mean)
    assert trust.fits_per_round == 1 and CrossFitTrust(refit="all").fits_per_round == 2
    # refit="all" refits both in round 3
    every = CrossFitTrust(refit="all", random_state=0)
    state = {"round": 1}
    every.fit_round(LogisticRegression(), X, y, U, None, CLASSES, state)
    state["round"] = 2
    every.fit_round(LogisticRegression(), X, y, U, truth, CLASSES, state)
    before = [m.estimator_.coef_.copy() for m in state["folds"]]
    state["round"] = 3
    every.fit_round(LogisticRegression(), X, y, U, flipped, CLASSES, state)
    pairs = zip(state["folds"], before, strict=True)
    assert not any(np.allclose(m.estimator_.coef_, b) for m, b in pairs)


def test_a_wrong_consensus_leaves_the_site_with_its_own_model() -> None:
    X, y, U, truth = _task(2)
    state: dict = {}
    trust = CrossFitTrust(random_state=0)
    trust.fit_round(LogisticRegression(), X, y, U, None, CLASSES, state)
    out = trust.fit_round(LogisticRegression(), X, y, U, 1 - truth, CLASSES, state)
    assert out.alpha == 0.0
    np.testing.assert_array_equal(out.model.predict(U), state["local"].predict(U))
    assert out.quality < 0.5  # the co-trained models learned the flipped pool
    good = trust.fit_round(LogisticRegression(), X, y, U, truth, CLASSES, state)
    assert good.alpha > 0.0 and good.quality > 0.9


def test_soft_consensus_and_abstentions() -> None:
    X, y, U, truth = _task(3)
    soft = np.eye(2)[truth].astype(float)
    soft[:10] = np.nan  # abstained rows carry no pseudo-label
    state: dict = {}
    out = CrossFitTrust(random_state=0).fit_round(
        LogisticRegression(), X, y, U, soft, CLASSES, state
    )
    assert out.on_public.shape == (len(U), 2)
    np.testing.assert_allclose(out.on_public.sum(axis=1), 1.0)


def test_too_few_rows_is_plain_cotraining() -> None:
    X, y, U, truth = _task(4, n=6)
    out = CrossFitTrust(random_state=0).fit_round(
        DecisionTreeClassifier(random_state=0), X, y, U, truth, CLASSES, {}
    )
    assert out.alpha == 1.0 and out.quality is None


@pytest.mark.parametrize(
    ("params", "word"),
    [({"n_folds": 1}, "n_folds"), ({"alphas": (0.5, 2.0)}, "alphas"), ({"z": -1}, "z"),
     ({"alphas": ()}, "alphas"), ({"local_folds": True}, "local_folds"),
     ({"pool": "half"}, "pool"), ({"refit": "some"}, "refit"), ({"prefer": "x"}, "prefer")],
)  # fmt: skip
def test_bad_parameters_name_themselves(params: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        CrossFitTrust(**params).check()
    with pytest.raises(ValueError, match=word):
        get_trust(CrossFitTrust(**params))


def test_auto_trust_per_setting() -> None:
    assert isinstance(get_trust("auto", 1, LogisticRegression()), CrossFitTrust)
    from cotrain.privacy import RandomizedResponse

    private = client_trust("auto", RandomizedResponse(epsilon=2.0), 1, LogisticRegression())
    assert isinstance(private, PseudoLabelTrust)
    with pytest.raises(ValueError, match="CrossFitTrust"):
        client_trust(CrossFitTrust(), RandomizedResponse(epsilon=2.0), 1)
    assert isinstance(get_trust(None), FixedTrust)


# ------------------------------------------------------------------- reliability vote
def test_reliability_vote_hand_computed() -> None:
    votes = np.array([[0, 1, 2], [1, 1, 0], [1, 2, 0]])
    # C = 3: w = log(2 q / (1 - q)): q 0.9 -> 2.890, q 0.6 -> 1.099 (two of them: 2.197)
    got = reliability_vote(votes, 3, reliability=[0.9, 0.6, 0.6])
    assert got.tolist() == [0, 1, 2]
    assert reliability_vote(votes, 3).tolist() == [1, 1, 0]  # plain plurality
    # at chance level (q = 1/3) a client's vote counts for nothing
    assert reliability_vote(votes, 3, reliability=[1 / 3, 0.6, 0.6]).tolist() == [1, 1, 0]


def test_reliability_vote_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="reliability"):
        reliability_vote(np.array([[0, 1]]), 2, reliability=[1.5])
    with pytest.raises(ValueError, match="shape"):
        reliability_vote(np.array([[0, 1]]), 2, reliability=[0.5, 0.5])
    rule = ReliabilityVote()
    assert rule.weights_for([0], 2, quality=[0.9]) is None  # the server passes n_classes
    with pytest.raises(ValueError, match=r"quality|reliability"):
        rule.weights_for([0], 2, quality=[0.9, 0.8], n_classes=2)
    assert isinstance(get_consensus("reliability"), ReliabilityVote)


# ------------------------------------------------------------------- blend
def test_blend_refuses_bad_alpha() -> None:
    X, y, _, _ = _task()
    local = ClassAlignedClassifier(LogisticRegression(), classes=CLASSES).fit(X, y)
    with pytest.raises(ValueError, match="alpha"):
        BlendedClassifier(local, cotrained=(), alpha=1.5).fit_blend()
    with pytest.raises(TypeError, match="alpha"):
        BlendedClassifier(local, cotrained=(), alpha="half").fit_blend()
    refit = BlendedClassifier(local, cotrained=[local], alpha=0.5).fit(X[:40], y[:40])
    assert refit.cotrained == () and refit.predict(X).shape == (len(X),)


# ------------------------------------------------------------------- the trainer
def test_trainer_defaults_protect_a_good_client_from_liars() -> None:
    """One honest client among three that learned flipped labels: under the defaults it
    keeps its own model (its predictions equal its local-only model's), while the paper's
    FedCT drags it to the liars' side."""
    X, y, U, _ = _task(6, n=240, n_public=400)
    parts = np.array_split(np.arange(len(y)), 4)
    Xs = [X[p] for p in parts]
    ys = [y[parts[0]]] + [1 - y[p] for p in parts[1:]]
    learners = [LogisticRegression() for _ in range(4)]
    trainer = FederatedCoTrainer(learners, rounds=3, random_state=0).fit(Xs, ys, X_public=U)
    assert isinstance(trainer.consensus_, DawidSkene)
    local = LogisticRegression().fit(Xs[0], ys[0])
    np.testing.assert_array_equal(trainer.clients_[0].predict(U), local.predict(U))
    assert trainer.history_[-1].trust[0] == 0.0
    # the liars' consensus wins the vote (three consistent voters against one); the
    # honest client's co-trained models learn it
    # and score low on its rows, so its predictor stays its own
    assert trainer.history_[-1].quality[0] < 0.1 < 0.9 < trainer.history_[-1].quality[1]
    plain = FederatedCoTrainer(learners, rounds=3, trust=None, consensus="majority",
                               random_state=0).fit(Xs, ys, X_public=U)  # fmt: skip
    assert np.mean(plain.clients_[0].predict(U) == (U[:, 0] > 0)) < 0.2


def test_trainer_records_quality_and_saves_the_blend(tmp_path) -> None:
    X, y, U, truth = _task(7, n=160)
    parts = np.array_split(np.arange(len(y)), 2)
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=0), LogisticRegression()], rounds=2, random_state=0
    ).fit([X[p] for p in parts], [y[p] for p in parts], X_public=U, y_public=truth)
    assert set(trainer.history_[0].quality) == {0, 1}
    assert isinstance(trainer.clients_[0], BlendedClassifier)
    frame = trainer.history_.to_frame()
    assert {"quality_client_0", "pseudo_label_accuracy"} <= set(frame.columns)
    loaded = FederatedCoTrainer.load(trainer.save(tmp_path / "fed"))
    np.testing.assert_array_equal(loaded.predict(U), trainer.predict(U))


def test_a_site_learns_the_classes_it_holds_no_row_of() -> None:
    """Label skew: a site that holds only class 0 cannot judge the federation's class 1 on
    its own rows, so the co-trained models predict it (its local model never could)."""
    X, y, U, truth = _task(8, n=240, n_public=400)
    zeros = np.flatnonzero(y == 0)[:60]
    rest = np.setdiff1d(np.arange(len(y)), zeros)
    Xs, ys = [X[zeros], X[rest[:90]], X[rest[90:]]], [y[zeros], y[rest[:90]], y[rest[90:]]]
    learners = [LogisticRegression() for _ in range(3)]
    trainer = FederatedCoTrainer(learners, rounds=3, random_state=0).fit(Xs, ys, X_public=U)
    site = trainer.clients_[0]
    assert site.held.tolist() == [True, False]
    assert np.mean(site.predict(U) == truth) > 0.9  # alone it says 0 for everything


def test_blend_passes_unheld_classes_through() -> None:
    co = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    local = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    held = np.array([True, True, False])
    # class 2 keeps its co-trained probability; the held mass 0.5 / 0.7 goes to the local
    np.testing.assert_allclose(blend_proba(co, local, 0.0, held), [[0.5, 0, 0.5], [0, 0.7, 0.3]])
    np.testing.assert_allclose(blend_proba(co, local, 1.0, held), co)


def test_a_forest_labels_the_pool_out_of_bag_in_one_fit() -> None:
    """A bagged learner needs no cross-fits: each pool row's label comes from the trees
    that did not see it (plain FedCT's forest echoes random pseudo-labels back)."""
    from sklearn.ensemble import RandomForestClassifier

    X, y, U, _ = _task(9, n=100, n_public=300)
    noise = np.random.default_rng(2).integers(0, 2, size=len(U))
    forest = RandomForestClassifier(n_estimators=60, random_state=0)
    state: dict = {}
    trust = CrossFitTrust(pool="cross_fit", random_state=0)
    first = trust.fit_round(forest, X, y, U, None, CLASSES, state)
    local = state["local"].estimator_
    np.testing.assert_allclose(state["local_oof"], local.oob_decision_function_)
    assert first.quality == np.mean(local.oob_decision_function_.argmax(axis=1) == y)
    out = trust.fit_round(forest, X, y, U, noise, CLASSES, state)
    (model,) = out.model.cotrained
    np.testing.assert_allclose(out.on_public, model.estimator_.oob_decision_function_[len(y) :])
    assert 0.35 < np.mean(out.on_public.argmax(axis=1) == noise) < 0.65
    in_sample = model.predict(U)
    assert np.mean(in_sample == noise) > 0.9
    # pool="whole": the same one fit sends its plain predictions on U (as FedCT's forest
    # would), and its out-of-bag votes on the private rows are still its quality
    state = {}
    whole = CrossFitTrust(random_state=0)
    whole.fit_round(forest, X, y, U, None, CLASSES, state)
    out = whole.fit_round(forest, X, y, U, noise, CLASSES, state)
    (model,) = out.model.cotrained
    np.testing.assert_allclose(out.on_public, model.predict_proba(U))
    oob = model.estimator_.oob_decision_function_[: len(y)]
    assert out.quality == np.mean(oob.argmax(axis=1) == y)


def test_a_resumed_forest_site_continues_as_an_uninterrupted_one(tmp_path) -> None:
    """A restored forest keeps its out-of-bag votes: the resumed run equals the whole one."""
    from sklearn.ensemble import RandomForestClassifier

    X, y, U, truth = _task(10, n=160)
    parts = np.array_split(np.arange(len(y)), 2)

    def fit(rounds, resume=False, **kwargs):
        learners = [RandomForestClassifier(n_estimators=30, random_state=0), LogisticRegression()]
        trainer = FederatedCoTrainer(learners, rounds=rounds, random_state=0, **kwargs)
        data = [X[p] for p in parts], [y[p] for p in parts]
        return trainer.fit(*data, X_public=U, y_public=truth, resume=resume)

    whole = fit(3)
    fit(1, checkpoint_dir=tmp_path)
    resumed = fit(3, checkpoint_dir=tmp_path, resume=True)
    assert [r.trust for r in resumed.history_] == [r.trust for r in whole.history_]
    assert [r.quality for r in resumed.history_] == [r.quality for r in whole.history_]
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, whole.pseudo_label_codes_)
