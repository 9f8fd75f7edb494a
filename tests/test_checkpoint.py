"""Checkpoints and resume: nothing is lost when a run dies, and nothing foreign is loaded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.persistence.checkpoint import Checkpointer, CheckpointError, load_model
from tests.conftest import RecordingTree, SlowTree, cancer_split

ROOT = Path(__file__).resolve().parents[1]


def mixed():
    return [DecisionTreeClassifier(), LogisticRegression(), DecisionTreeClassifier(max_depth=3)]


def trainer(rounds=6, estimators=None, **params):
    defaults = {"encoding": "delta", "participation": 0.67, "random_state": 0}
    return FederatedCoTrainer(estimators or mixed(), rounds=rounds, **{**defaults, **params})


def fit(model, cancer, **kwargs):
    return model.fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        **kwargs,
    )


def assert_same_run(a, b, X_test):
    np.testing.assert_array_equal(a.pseudo_label_codes_, b.pseudo_label_codes_)
    np.testing.assert_array_equal(a.predict(X_test), b.predict(X_test))
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    assert [r.clients for r in a.history_] == [r.clients for r in b.history_]
    assert [r.bytes_up for r in a.history_] == [r.bytes_up for r in b.history_]
    assert [r.mean_accuracy for r in a.history_] == [r.mean_accuracy for r in b.history_]


@pytest.mark.slow
def test_extending_a_finished_run_equals_one_long_run(cancer, tmp_path):
    full = fit(trainer(6), cancer)
    fit(trainer(3, checkpoint_dir=tmp_path), cancer)
    resumed = fit(trainer(6, checkpoint_dir=tmp_path), cancer, resume=True)
    assert resumed.n_rounds_ == 6
    assert_same_run(resumed, full, cancer["X_test"])


def test_a_fresh_fit_replaces_old_checkpoints(cancer, tmp_path):
    fit(trainer(3, checkpoint_dir=tmp_path), cancer)
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    assert (tmp_path / "LATEST").read_text() == "round-000002"
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-000001", "round-000002"]


def test_crash_while_writing_leaves_the_previous_checkpoint_usable(cancer, tmp_path, monkeypatch):
    from cotrain.persistence import checkpoint

    real = checkpoint.save_model

    def dying_save(model, folder, name):
        if folder.name.startswith(".round-000003") and name == "client-1":
            raise OSError("disk died mid-write")
        return real(model, folder, name)

    monkeypatch.setattr(checkpoint, "save_model", dying_save)
    with pytest.raises(OSError, match="disk died"):
        fit(trainer(6, checkpoint_dir=tmp_path), cancer)
    assert (tmp_path / "LATEST").read_text() == "round-000002"
    monkeypatch.setattr(checkpoint, "save_model", real)
    resumed = fit(trainer(6, checkpoint_dir=tmp_path), cancer, resume=True)
    assert_same_run(resumed, fit(trainer(6), cancer), cancer["X_test"])


def test_altered_checkpoint_is_refused(cancer, tmp_path):
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    arrays = tmp_path / "round-000002" / "arrays.npz"
    data = bytearray(arrays.read_bytes())
    data[-40] ^= 0xFF
    arrays.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"arrays.npz was altered or is corrupt"):
        fit(trainer(4, checkpoint_dir=tmp_path), cancer, resume=True)


def test_extra_file_in_checkpoint_is_refused(cancer, tmp_path):
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    (tmp_path / "round-000002" / "client-9.skops").write_bytes(b"x")
    with pytest.raises(CheckpointError, match="incomplete or was altered"):
        fit(trainer(4, checkpoint_dir=tmp_path), cancer, resume=True)


@pytest.mark.parametrize(
    "change",
    [
        {
            "estimators": [
                DecisionTreeClassifier(max_depth=2),
                LogisticRegression(),
                LogisticRegression(),
            ]
        },
        {"consensus": "qualified"},
        {"random_state": 1},
        {"encoding": "packed"},
    ],
    ids=["estimators", "consensus", "seed", "encoding"],
)
def test_checkpoint_of_another_configuration_is_refused(cancer, tmp_path, change):
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    with pytest.raises(ValueError, match="different configuration or data"):
        fit(trainer(4, checkpoint_dir=tmp_path, **change), cancer, resume=True)


def test_checkpoint_of_other_data_is_refused(cancer, tmp_path):
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    other = dict(cancer, X_public=cancer["X_public"][:-1])
    with pytest.raises(ValueError, match="different configuration or data"):
        fit(trainer(4, checkpoint_dir=tmp_path), other, resume=True)


def test_model_of_an_unconfigured_type_is_not_loaded(cancer, tmp_path):
    fit(
        trainer(1, estimators=[RecordingTree()] * 3, participation=1.0, checkpoint_dir=tmp_path),
        cancer,
    )
    folder = tmp_path / "round-000001"
    with pytest.raises(CheckpointError, match=r"tests\.conftest\.RecordingTree"):
        load_model(folder, "client-0", trusted_types=set())
    # the trainer that was configured with RecordingTree trusts it
    resumed = fit(
        trainer(2, estimators=[RecordingTree()] * 3, participation=1.0, checkpoint_dir=tmp_path),
        cancer,
        resume=True,
    )
    assert resumed.n_rounds_ == 2


def test_checkpoint_files_hold_no_pickle(cancer, tmp_path):
    fit(trainer(2, checkpoint_dir=tmp_path), cancer)
    folder = tmp_path / "round-000002"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["files"]) == {
        "arrays.npz",
        "broadcast.bin",
        "state.json",
        *(f"client-{i}.skops" for i in range(3)),
    }
    with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:  # raises on pickles
        assert arrays["cluster_consensus.0"].shape == (300,)  # the consensus, as formed


def test_early_stopping_stops_once_stable_and_resuming_does_nothing(cancer, tmp_path):
    # the class from `tests.conftest`, not the fixture's: pytest may import the fixture
    # module as a top-level `conftest`, a name skops could not import back reliably
    recording_tree = RecordingTree
    recording_tree.sizes = []
    model = trainer(
        30,
        estimators=[recording_tree()] * 3,
        early_stopping=2,
        checkpoint_dir=tmp_path,
        trust=None,  # plain FedCT: trees reproduce the consensus, which soon stops changing
    )
    fit(model, cancer)
    assert model.stopped_reason_ == "early stopping"
    assert model.n_rounds_ < 30
    assert [r.changed for r in model.history_][-2:] == [0, 0]
    assert all(r.changed != 0 for r in list(model.history_)[1:-2])  # settled only at the end
    fits = len(recording_tree.sizes)
    again = fit(
        trainer(
            30,
            estimators=[recording_tree()] * 3,
            early_stopping=2,
            checkpoint_dir=tmp_path,
            trust=None,
        ),
        cancer,
        resume=True,
    )
    assert len(recording_tree.sizes) == fits  # no client trained again
    assert again.n_rounds_ == model.n_rounds_ and again.stopped_reason_ == "early stopping"
    assert_same_run(again, model, cancer["X_test"])


def test_checkpoint_arguments_are_checked_before_training(cancer, tmp_path, recording_tree):
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        fit(trainer(2), cancer, resume=True)
    with pytest.raises(TypeError, match="checkpoint_dir must be a path"):
        fit(trainer(2, estimators=[recording_tree()] * 3, checkpoint_dir=3), cancer)
    assert recording_tree.sizes == []
    pytest.importorskip("imodels")
    from learners import RuleFitClassifier

    with pytest.raises(
        NotImplementedError, match="RuleFitClassifier models cannot be checkpointed"
    ):
        fit(trainer(2, estimators=[RuleFitClassifier()] * 3, checkpoint_dir=tmp_path), cancer)


def test_checkpointer_keeps_two_and_points_latest_at_the_newest(tmp_path):
    ckpt = Checkpointer(tmp_path, config="c")
    for t in range(1, 5):
        ckpt.save(t, {"round": t}, {"a": np.arange(t)}, None, {})
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-000003", "round-000004"]
    state, arrays, broadcast, _ = ckpt.load()
    assert state == {"round": 4} and arrays["a"].tolist() == [0, 1, 2, 3] and broadcast is None
    with pytest.raises(CheckpointError, match="different configuration"):
        Checkpointer(tmp_path, config="other").load()


# ----------------------------------------------------------------- SIGKILL
WORKER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{root!r}]
    from tests.test_checkpoint import run_case
    run_case({case!r}, {directory!r})
    """
)


def case_trainer(case, directory=None):
    """The federation each SIGKILL case runs (slow rounds, so a kill lands mid-round)."""
    if case == "sklearn":
        estimators = [
            SlowTree(delay=0.15),
            LogisticRegression(),
            DecisionTreeClassifier(max_depth=3),
        ]
    else:
        from learners.modules import MLP
        from learners.torch import TorchClassifier

        def net():
            return TorchClassifier(
                module=MLP, module_params={"hidden": (16,)}, epochs_per_fit=3, n_threads=1
            )

        estimators = [net(), net(), SlowTree(delay=0.15)]
    return FederatedCoTrainer(
        estimators,
        rounds=8,
        encoding="delta",
        random_state=0,
        checkpoint_dir=directory,
    )


def run_case(case, directory):
    data = cancer_split()
    case_trainer(case, directory).fit(data["X"], data["y"], X_public=data["X_public"])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sklearn", "torch"])
def test_run_killed_mid_round_resumes_to_the_uninterrupted_result(case, cancer, tmp_path):
    if case == "torch":
        pytest.importorskip("torch")
    directory = tmp_path / "ckpt"
    script = WORKER.format(root=str(ROOT), case=case, directory=str(directory))
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    latest = directory / "LATEST"
    deadline = time.monotonic() + 120
    while not (latest.exists() and latest.read_text() >= "round-000003"):
        assert child.poll() is None, "the training process ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.1)  # into round 4
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    done = int(latest.read_text().split("-")[1])
    assert 3 <= done < 8, "the kill must land before the run finished"

    resumed = case_trainer(case, directory).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"], resume=True
    )
    uninterrupted = case_trainer(case).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, uninterrupted.pseudo_label_codes_)
    np.testing.assert_array_equal(
        resumed.predict(cancer["X_test"]), uninterrupted.predict(cancer["X_test"])
    )
    np.testing.assert_array_equal(
        resumed.predict_proba(cancer["X_test"]), uninterrupted.predict_proba(cancer["X_test"])
    )
    assert resumed.n_rounds_ == 8
    assert [r.bytes_up for r in resumed.history_] == [r.bytes_up for r in uninterrupted.history_]


def test_noise_streams_and_privacy_ledger_continue_exactly(cancer, tmp_path):
    """With the (warned, simulation-only) reproducible noise, a resumed run draws exactly
    the noise of an uninterrupted one; the ledger continues where it stopped."""
    pytest.importorskip("dp_accounting", reason="the privacy ledger records dp_accounting events")
    from consensus import NoisyArgmax
    from cotrain.privacy import RandomizedResponse

    def noisy(rounds, **kw):
        return trainer(
            rounds,
            consensus=NoisyArgmax(sigma=50.0, random_state=5),
            privacy=RandomizedResponse(epsilon=300.0),
            classes=[0, 1],
            reproducible_noise=True,
            **kw,
        )

    with pytest.warns(UserWarning, match="replay"):
        full = fit(noisy(5), cancer)
        fit(noisy(2, checkpoint_dir=tmp_path), cancer)
        resumed = fit(noisy(5, checkpoint_dir=tmp_path), cancer, resume=True)
    assert_same_run(resumed, full, cancer["X_test"])
    # ε is a root found by bisection (to ~1e-12): equal up to that tolerance, whatever
    # round the accountant's running state was rebuilt from
    got, want = resumed.privacy_report(), full.privacy_report()
    assert [c["rounds"] for c in got["clients"]] == [c["rounds"] for c in want["clients"]]
    for g, w in zip(got["guarantees"], want["guarantees"], strict=True):
        assert [c["epsilon"] for c in g["clients"]] == pytest.approx(
            [c["epsilon"] for c in w["clients"]], rel=1e-10
        )
    assert [r.epsilon for r in resumed.history_] == pytest.approx(
        [r.epsilon for r in full.history_], rel=1e-10
    )


def test_reputation_state_is_checkpointed(cancer, tmp_path):
    from consensus import ReputationVote
    from cotrain.robustness.hostile import HostileClassifier

    def hostile(rounds, **kw):
        estimators = [
            DecisionTreeClassifier(max_depth=2),
            LogisticRegression(),
            HostileClassifier(DecisionTreeClassifier(), behavior="random", random_state=0),
        ]
        return trainer(rounds, estimators=estimators, consensus=ReputationVote(decay=0.5), **kw)

    full = fit(hostile(5), cancer)
    fit(hostile(2, checkpoint_dir=tmp_path), cancer)
    resumed = fit(hostile(5, checkpoint_dir=tmp_path), cancer, resume=True)
    assert_same_run(resumed, full, cancer["X_test"])
    np.testing.assert_array_equal(
        resumed.consensus_.state_dict()["reputation"], full.consensus_.state_dict()["reputation"]
    )


@pytest.mark.slow
def test_xgboost_continued_boosting_and_joblib_workers_resume_exactly(cancer, tmp_path):
    pytest.importorskip("xgboost")
    from learners import XGBoostClassifier

    def boosted(rounds, **kw):
        estimators = [
            XGBoostClassifier(n_estimators=5),
            LogisticRegression(),
            DecisionTreeClassifier(),
        ]
        return trainer(rounds, estimators=estimators, n_jobs=2, **kw)

    full = fit(boosted(4), cancer)
    fit(boosted(2, checkpoint_dir=tmp_path), cancer)
    resumed = fit(boosted(4, checkpoint_dir=tmp_path), cancer, resume=True)
    assert_same_run(resumed, full, cancer["X_test"])


def shipped_learner(name):
    """One of the learners the library ships, with its defaults (sampling included)."""
    if name == "xgboost":
        pytest.importorskip("xgboost")
        from learners import XGBoostClassifier

        return XGBoostClassifier()
    if name == "rulefit":
        pytest.importorskip("imodels")
        from learners import RuleFitClassifier

        return RuleFitClassifier()
    pytest.importorskip("torch")
    from learners.modules import MLP
    from learners.torch import TorchClassifier

    return TorchClassifier(module=MLP, module_params={"hidden": (8,)}, n_threads=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xgboost", "rulefit", "torch"])
def test_every_shipped_learner_resumes_exactly(name, cancer, tmp_path):
    """Resumed = uninterrupted, history and predictions, for each learner the library ships,
    under the default trust (its kept cross-fitted models) and FedCT (issue 41). RuleFit
    cannot be checkpointed yet (README, missing): refused before training."""
    if name == "rulefit":
        with pytest.raises(NotImplementedError, match="RuleFitClassifier"):
            fit(trainer(2, estimators=[shipped_learner(name)] * 3, checkpoint_dir=tmp_path), cancer)
        return

    def run(rounds, options, **kw):
        estimators = [shipped_learner(name), shipped_learner(name), LogisticRegression()]
        return trainer(rounds, estimators=estimators, **options, **kw)

    for options in ({}, {"trust": None, "consensus": "majority"}):
        folder = tmp_path / str(len(options))
        full = fit(run(6, options), cancer)
        fit(run(3, options, checkpoint_dir=folder), cancer)
        resumed = fit(run(6, options, checkpoint_dir=folder), cancer, resume=True)
        assert_same_run(resumed, full, cancer["X_test"])
        assert [r.client_accuracy for r in resumed.history_] == [
            r.client_accuracy for r in full.history_
        ]


def test_checkpointer_finds_the_latest_round_before_a_given_one(tmp_path):
    """A Flower site restores the state of its last round before the one it is asked to
    run (a ServerApp that resumed an earlier round finds the site's state of that time)."""
    from cotrain.persistence.checkpoint import Checkpointer

    ckpt = Checkpointer(tmp_path, config="x", keep=3)
    for t in (1, 2, 4):
        ckpt.save(t, {"round": t}, {}, None, {})
    assert ckpt.latest().name == "round-000004"
    assert ckpt.latest(before=4).name == "round-000002"
    assert ckpt.latest(before=3).name == "round-000002"
    assert ckpt.latest(before=1) is None
    assert ckpt.load(before=2)[0]["round"] == 1
