"""Saving a fitted trainer and loading it back: skops, trusted types only, the public pool
left out by default, and nothing but the fitted attributes on either side."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.validation import check_is_fitted

from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.persistence import saving
from cotrain.persistence.saving import DroppedDataError, SavedFederationError, load_federation
from tests.conftest import FailingClassifier, RecordingTree


def fit(cancer, estimators, **params):
    params.setdefault("rounds", 3)
    params.setdefault("random_state", 0)
    params.setdefault("trust", None)
    return FederatedCoTrainer(estimators, **params).fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        y_public=cancer["y_public"],
    )


MIXED = [
    DecisionTreeClassifier(random_state=0),
    LogisticRegression(max_iter=1000),
    DecisionTreeClassifier(max_depth=3, random_state=1),
]


@pytest.fixture(scope="module")
def mixed(cancer):
    return fit(cancer, MIXED)


def assert_same_federation(loaded, trainer, X_test):
    np.testing.assert_array_equal(loaded.predict(X_test), trainer.predict(X_test))
    np.testing.assert_array_equal(loaded.predict_proba(X_test), trainer.predict_proba(X_test))
    np.testing.assert_array_equal(loaded.classes_, trainer.classes_)
    assert list(loaded.history_) == list(trainer.history_)
    np.testing.assert_array_equal(loaded.pseudo_labels_, trainer.pseudo_labels_)
    np.testing.assert_array_equal(loaded.pseudo_labels_.mask, trainer.pseudo_labels_.mask)
    np.testing.assert_array_equal(loaded.pseudo_label_codes_, trainer.pseudo_label_codes_)
    assert [type(m) for m in loaded.clients_] == [type(m) for m in trainer.clients_]
    assert loaded.n_rounds_ == trainer.n_rounds_
    assert loaded.learner_warnings_ == trainer.learner_warnings_


@pytest.mark.slow
def test_round_trip_of_a_mixed_federation(mixed, cancer, tmp_path):
    folder = mixed.save(tmp_path / "fed")
    loaded = FederatedCoTrainer.load(folder)
    assert_same_federation(loaded, mixed, cancer["X_test"])
    assert loaded.score(cancer["X_test"], cancer["y_test"]) > 0.85
    assert loaded.get_params()["consensus"] == "auto"
    assert loaded.n_features_in_ == cancer["X_test"].shape[1]


def test_drop_data_is_the_default_and_leaves_every_row_out(mixed, cancer, tmp_path):
    folder = mixed.save(tmp_path / "fed")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["drop_data"] is True
    assert "data.skops" not in manifest["files"]
    # no client's training rows and no public row is anywhere in the folder
    blob = b"".join(p.read_bytes() for p in folder.iterdir())
    for rows in [cancer["X"][0], cancer["X_public"], cancer["X_test"]]:
        assert rows[:3].tobytes() not in blob
    loaded = FederatedCoTrainer.load(folder)
    with pytest.raises(DroppedDataError, match="drop_data=True"):
        loaded.distill(DecisionTreeClassifier())
    # a fitted trainer keeps no client's rows, only the public pool (for distill)
    live = pickle.dumps(mixed)
    assert all(rows[:3].tobytes() not in live for rows in cancer["X"])
    assert cancer["X_public"][:3].tobytes() in live


def test_keeping_the_data_lets_the_loaded_trainer_distill(mixed, cancer, tmp_path):
    loaded = FederatedCoTrainer.load(mixed.save(tmp_path / "fed", drop_data=False))
    assert_same_federation(loaded, mixed, cancer["X_test"])
    student = loaded.distill(DecisionTreeClassifier(random_state=0))
    expected = mixed.distill(DecisionTreeClassifier(random_state=0))
    np.testing.assert_array_equal(
        student.predict(cancer["X_test"]), expected.predict(cancer["X_test"])
    )
    # a trainer loaded without data cannot be saved with it
    dropped = FederatedCoTrainer.load(mixed.save(tmp_path / "dropped"))
    with pytest.raises(DroppedDataError):
        dropped.save(tmp_path / "again", drop_data=False)
    assert_same_federation(FederatedCoTrainer.load(dropped.save(tmp_path / "again")), mixed,
                           cancer["X_test"])  # fmt: skip


def test_soft_consensus_and_string_labels_round_trip(cancer, tmp_path):
    names = np.array(["benign", "malignant"])
    data = {**cancer, "y": [names[y] for y in cancer["y"]], "y_test": names[cancer["y_test"]],
            "y_public": names[cancer["y_public"]]}  # fmt: skip
    trainer = fit(data, MIXED, share="soft", consensus="mean", rounds=2)
    loaded = FederatedCoTrainer.load(trainer.save(tmp_path / "fed"))
    np.testing.assert_array_equal(
        loaded.predict(cancer["X_test"]), trainer.predict(cancer["X_test"])
    )
    np.testing.assert_array_equal(loaded.pseudo_labels_, trainer.pseudo_labels_)
    assert loaded.pseudo_labels_.shape == (300, 2)
    assert list(loaded.history_) == list(trainer.history_)


def test_an_untrusted_type_is_refused_until_trusted(cancer, tmp_path):
    trainer = fit(cancer, [RecordingTree(random_state=0)] * 3, rounds=1)
    folder = trainer.save(tmp_path / "fed")
    with pytest.raises(SavedFederationError, match=r"tests\.conftest\.RecordingTree"):
        FederatedCoTrainer.load(folder)
    loaded = FederatedCoTrainer.load(folder, trusted=[RecordingTree])
    np.testing.assert_array_equal(
        loaded.predict(cancer["X_test"]), trainer.predict(cancer["X_test"])
    )
    assert (
        load_federation(
            folder, FederatedCoTrainer, trusted=["tests.conftest.RecordingTree"]
        ).n_rounds_
        == 1
    )


def test_an_altered_file_or_foreign_folder_is_refused(mixed, tmp_path):
    folder = mixed.save(tmp_path / "fed")
    state = folder / "state.json"
    state.write_text(state.read_text().replace('"n_rounds": 3', '"n_rounds": 4'))
    with pytest.raises(SavedFederationError, match="altered"):
        FederatedCoTrainer.load(folder)
    mixed.save(folder)  # a saved federation is replaced
    FederatedCoTrainer.load(folder)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a saved federation"):
        mixed.save(other)
    assert (other / "notes.txt").read_text() == "keep me"
    with pytest.raises(SavedFederationError, match="not a saved federation"):
        FederatedCoTrainer.load(other)


def test_privacy_report_and_configuration_objects_round_trip(cancer, tmp_path):
    from cotrain import privacy
    from cotrain.trust import PseudoLabelTrust

    trainer = fit(
        cancer, MIXED, rounds=2, privacy=privacy.RandomizedResponse(epsilon=1.0),
        classes=[0, 1], trust=PseudoLabelTrust(cv=2),
    )  # fmt: skip
    loaded = FederatedCoTrainer.load(trainer.save(tmp_path / "fed"))
    assert loaded.privacy_report() == trainer.privacy_report()
    assert repr(loaded.get_params()["privacy"]) == repr(trainer.privacy)
    assert repr(loaded.get_params()["trust"]) == repr(trainer.trust)
    np.testing.assert_array_equal(
        loaded.predict(cancer["X_test"]), trainer.predict(cancer["X_test"])
    )


@pytest.mark.slow
def test_a_learner_skops_cannot_store_is_refused_before_anything_is_written(cancer, tmp_path):
    pytest.importorskip("imodels")
    from learners import RuleFitClassifier

    trainer = fit(cancer, [RuleFitClassifier(max_rules=5, random_state=0)] * 3, rounds=1)
    with pytest.raises(NotImplementedError, match="RuleFitClassifier models cannot be saved"):
        trainer.save(tmp_path / "fed")
    assert not tmp_path.joinpath("fed").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_clustering_rule_object_round_trips_without_trusted(cancer, tmp_path):
    from cotrain.clustering import AgreementClustering

    rule = AgreementClustering(max_cross=0.99, min_gap=0.0)
    trainer = fit(cancer, MIXED, rounds=2, clustering=rule)
    loaded = FederatedCoTrainer.load(trainer.save(tmp_path / "fed"))
    assert loaded.clustering == rule
    assert [r.clusters for r in loaded.history_] == [r.clusters for r in trainer.history_]
    assert_same_federation(loaded, trainer, cancer["X_test"])


def test_a_model_trust_object_round_trips_without_trusted(cancer, tmp_path):
    from cotrain.persistence.saving import SAVED_TRUSTED_MODULES
    from cotrain.trust import MODEL_TRUSTS, CrossFitTrust

    assert all(t.__module__.startswith(SAVED_TRUSTED_MODULES) for t in MODEL_TRUSTS)
    trees = [DecisionTreeClassifier(max_depth=3, random_state=i) for i in range(3)]
    trainer = fit(cancer, trees, rounds=2, trust=CrossFitTrust(random_state=0))
    loaded = FederatedCoTrainer.load(trainer.save(tmp_path / "fed"))
    assert repr(loaded.get_params()["trust"]) == repr(trainer.trust)
    assert_same_federation(loaded, trainer, cancer["X_test"])


FITTED = (
    "classes_", "consensus_", "n_features_in_", "feature_shape_", "clients_", "client_models_",
    "pseudo_labels_", "pseudo_label_codes_", "history_", "n_rounds_", "stopped_reason_",
    "learner_warnings_", "privacy_report_", "X_public_",
)  # fmt: skip


def test_fit_leaves_its_outcome_in_fitted_attributes_and_no_run(mixed, cancer):
    state = vars(mixed)
    assert set(FITTED) <= set(state)
    assert not [k for k in state if k.startswith("_")]  # no run object, no private state
    assert state["n_rounds_"] == 3 and state["privacy_report_"] is None
    assert state["X_public_"] is cancer["X_public"]
    check_is_fitted(mixed)
    with pytest.raises(NotFittedError):
        check_is_fitted(clone(mixed))
    # predict is the majority of the three local models (0/1 labels: two votes win)
    votes = np.stack([m.predict(cancer["X_test"]) for m in mixed.clients_])
    np.testing.assert_array_equal(mixed.predict(cancer["X_test"]), votes.sum(axis=0) >= 2)
    assert [m.estimator_ for m in mixed.client_models_] == mixed.clients_


def test_a_loaded_trainer_predicts_with_no_stand_in_class(mixed, cancer, tmp_path):
    for name in ("_Client", "_Server", "_Ledger", "SavedFederation"):
        assert not hasattr(saving, name)
    loaded = FederatedCoTrainer.load(mixed.save(tmp_path / "fed"))
    assert set(vars(loaded)) == set(vars(mixed))
    assert loaded.X_public_ is None
    assert_same_federation(loaded, mixed, cancer["X_test"])
    assert loaded.score(cancer["X_test"], cancer["y_test"]) == mixed.score(
        cancer["X_test"], cancer["y_test"]
    )


class Codes(Callback):
    def __init__(self):
        self.codes = []

    def on_round_end(self, loop, record):
        self.codes.append(np.array(loop.owner.pseudo_label_codes_))


def test_the_consensus_attributes_are_current_after_every_round(cancer):
    codes = Codes()
    trainer = fit(cancer, MIXED, rounds=3, callbacks=[codes])
    assert len(codes.codes) == 3
    np.testing.assert_array_equal(codes.codes[-1], trainer.pseudo_label_codes_)
    for t in (1, 2):  # what the history counts as changed is what a callback saw change
        assert trainer.history_[t].changed == (codes.codes[t] != codes.codes[t - 1]).sum()


def test_a_new_fit_keeps_nothing_of_the_last_one(cancer):
    trainer = fit(cancer, MIXED, rounds=2)
    trainer.set_params(estimators=[FailingClassifier()] * 3)
    with pytest.raises(RuntimeError):
        trainer.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    for name in ("clients_", "client_models_", "pseudo_labels_", "X_public_", "n_rounds_"):
        assert not hasattr(trainer, name)
    assert not [k for k in vars(trainer) if k.startswith("_")]


def rewrite(folder, manifest, **files):
    """Replace files of a saved folder and its manifest, with matching hashes."""
    for name, data in files.items():
        (folder / name).write_bytes(data)
    manifest["files"] = {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in manifest["files"]
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_format_1_still_loads_and_an_unknown_format_is_refused(mixed, cancer, tmp_path):
    import skops.io as sio

    folder = mixed.save(tmp_path / "fed", drop_data=False)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == 2
    # format 1 kept every validated input of fit in data.skops
    old = {"X_clients": cancer["X"], "y_clients": cancer["y"], "X_public": cancer["X_public"],
           "classes": mixed.classes_, "X_eval": None, "y_eval_codes": None,
           "y_public_codes": None, "feature_names": None}  # fmt: skip
    rewrite(folder, {**manifest, "format": 1}, **{"data.skops": sio.dumps(old)})
    loaded = FederatedCoTrainer.load(folder)
    assert_same_federation(loaded, mixed, cancer["X_test"])
    np.testing.assert_array_equal(loaded.X_public_, cancer["X_public"])
    student = loaded.distill(DecisionTreeClassifier(random_state=0))
    expected = mixed.distill(DecisionTreeClassifier(random_state=0))
    np.testing.assert_array_equal(
        student.predict(cancer["X_test"]), expected.predict(cancer["X_test"])
    )
    rewrite(folder, {**manifest, "format": 3})
    with pytest.raises(SavedFederationError, match=r"format 3 .* reads formats 1, 2"):
        FederatedCoTrainer.load(folder)


def test_a_resumed_fit_ends_with_the_same_fitted_attributes(cancer, tmp_path):
    """A run restored from its last checkpoint (finished: no round runs) sets every fitted
    attribute as the uninterrupted fit did, and keeps no run either."""
    done = fit(cancer, MIXED, rounds=2, checkpoint_dir=tmp_path)
    resumed = FederatedCoTrainer(
        MIXED, rounds=2, random_state=0, trust=None, checkpoint_dir=tmp_path
    )
    resumed.fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        y_public=cancer["y_public"],
        resume=True,
    )
    assert set(vars(resumed)) == set(vars(done))
    assert_same_federation(resumed, done, cancer["X_test"])
    np.testing.assert_array_equal(resumed.X_public_, cancer["X_public"])
    assert [type(m) for m in resumed.client_models_] == [type(m) for m in done.client_models_]
