"""Experiment tracking: MLflowLogger and TensorBoardLogger, read back with the real packages."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback, EarlyStopping
from cotrain.federation.loop import RoundLoop
from cotrain.history import History, RoundRecord
from cotrain.tracking import (
    MLflowLogger,
    TensorBoardLogger,
    TrackingWarning,
    render_param,
    round_metrics,
)

# ----------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    """One SQLite store for the module (creating its tables takes MLflow ~2 s)."""
    pytest.importorskip("mlflow")
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


@pytest.fixture
def tensorboard():
    return pytest.importorskip("tensorboard")


def mlflow_client(uri):
    from mlflow import MlflowClient

    return MlflowClient(uri)


def metric_history(client, run_id, key):
    """(step, value) pairs of one metric, by step."""
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def read_scalars(log_dir):
    """TensorBoard's own reader: ``{tag: [(step, value), ...]}`` and the accumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    return scalars, acc


def fit(cancer, callbacks, **params):
    params.setdefault("rounds", 3)
    params.setdefault("random_state", 0)
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3)] * 3, callbacks=callbacks, **params
    )
    return trainer.fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        y_public=cancer["y_public"],
    )


class Owner:
    """A loop owner with scikit-learn-style parameters of every awkward kind."""

    def get_params(self, deep=True):
        class BrokenRepr:
            def __repr__(self):
                raise RuntimeError("no repr")

        return {
            "rounds": 4,
            "estimators": [DecisionTreeClassifier(max_depth=2)] * 2,
            "privacy": None,
            "runtime": object(),
            "sampler": json.dumps,
            "broken": BrokenRepr(),
            "note": "x" * 900,
        }


RECORDS = [
    RoundRecord(
        round=1,
        clients=(0, 1, 2),
        coverage=1.0,
        agreement=0.8,
        bytes_up=94,
        bytes_down=0,
        time_s=0.25,
        learner_time_s=0.125,
        client_accuracy={0: 0.9, 1: 0.8, 2: 0.7},
        mean_accuracy=0.8,
        std_accuracy=0.0816496580927726,
        consensus_accuracy=0.85,
        pseudo_label_accuracy=0.9,
        epsilon=0.5,
    ),
    RoundRecord(
        round=2,
        clients=(0, 1, 2),
        failed={2: "ArithmeticError: boom"},
        coverage=0.9,
        agreement=0.95,
        changed=7,
        bytes_up=62,
        bytes_down=47,
        time_s=0.5,
        client_accuracy={0: 0.91, 1: 0.83},
        mean_accuracy=0.87,
        epsilon=1.0,
    ),
    RoundRecord(
        round=3,
        clients=(0, 1, 2),
        timed_out=(1,),
        coverage=1.0,
        agreement=1.0,
        changed=0,
        bytes_up=62,
        bytes_down=47,
        epsilon=1.5,
    ),
    RoundRecord(round=4, clients=(0, 1, 2), coverage=1.0, agreement=1.0, changed=0),
]


def synthetic_loop(callbacks, rounds=4, start=1, history=None, fail_at=None):
    def run_round(t, sampled):
        if t == fail_at:
            raise ArithmeticError("the round itself failed")
        return RECORDS[t - 1]

    return RoundLoop(
        run_round,
        lambda: np.arange(3),
        rounds=rounds,
        callbacks=callbacks,
        history=history,
        start=start,
        owner=Owner(),
    )


# ----------------------------------------------------------------- no tracking packages needed


@pytest.mark.slow
def test_import_cotrain_tracking_does_not_import_the_tracking_packages():
    code = (
        "import sys, cotrain, cotrain.tracking, cotrain.federation.loop, cotrain.callbacks; "
        "heavy = {'mlflow', 'tensorboard', 'torch', 'tensorflow'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_round_metrics_are_the_numeric_fields_of_a_record():
    assert round_metrics(RECORDS[1]) == {
        "coverage": 0.9,
        "agreement": 0.95,
        "changed": 7.0,
        "bytes_up": 62.0,
        "bytes_down": 47.0,
        "time_s": 0.5,
        "learner_time_s": 0.0,
        "mean_accuracy": 0.87,
        "epsilon": 1.0,
        "client_0_accuracy": 0.91,
        "client_1_accuracy": 0.83,
        "n_clients": 3.0,
        "n_failed": 1.0,
        "n_timed_out": 0.0,
    }
    # round 1 has no `changed`; an unmeasured (NaN) coverage is left out
    assert "changed" not in round_metrics(RECORDS[0])
    assert "coverage" not in round_metrics(RoundRecord(round=1))


def test_parameters_render_as_short_stable_strings():
    assert render_param(3) == "3" and render_param(None) == "None" and render_param(0.5) == "0.5"
    assert render_param(np.int64(7)) == "7"
    two_trees = [DecisionTreeClassifier(max_depth=2)] * 2
    assert render_param(two_trees) == (
        "[DecisionTreeClassifier(max_depth=2), DecisionTreeClassifier(max_depth=2)]"
    )
    assert render_param(object()) == "object"  # not the address, which changes every run
    assert render_param(json.dumps) == "json.dumps"
    assert len(render_param("x" * 900)) == 500 and render_param("x" * 900).endswith("...")


# ----------------------------------------------------------------- MLflow


@pytest.mark.slow
def test_mlflow_logs_a_federation_exactly(cancer, mlflow_uri):
    logger = MLflowLogger(experiment_name="fedct", run_name="trees", tracking_uri=mlflow_uri)
    trainer = fit(cancer, [logger])
    history = trainer.history_
    assert len(history) == 3

    client = mlflow_client(mlflow_uri)
    run = client.get_run(logger.run_id_)
    assert run.info.status == "FINISHED"  # the logger started the run, so it ended it
    assert run.info.run_name == "trees"
    assert client.get_experiment(run.info.experiment_id).name == "fedct"
    # every metric of every round, at step = round, equal to the history's values
    for key in ("bytes_up", "bytes_down", "coverage", "agreement", "mean_accuracy",
                "std_accuracy", "consensus_accuracy", "pseudo_label_accuracy", "time_s",
                "learner_time_s"):  # fmt: skip
        assert metric_history(client, logger.run_id_, key) == [
            (r.round, float(getattr(r, key))) for r in history
        ], key
    assert metric_history(client, logger.run_id_, "changed") == [
        (r.round, float(r.changed)) for r in history if r.changed is not None
    ]
    for i in range(3):
        assert metric_history(client, logger.run_id_, f"client_{i}_accuracy") == [
            (r.round, r.client_accuracy[i]) for r in history
        ]
    assert metric_history(client, logger.run_id_, "n_failed") == [(1, 0.0), (2, 0.0), (3, 0.0)]
    assert "epsilon" not in run.data.metrics  # no privacy mechanism: no ε
    params = run.data.params
    assert params["rounds"] == "3" and params["random_state"] == "0"
    assert params["consensus"] == "auto" and params["privacy"] == "None"
    assert params["estimators"].startswith("[DecisionTreeClassifier(max_depth=3),")
    assert "callbacks" not in params  # how the run is observed, not what it computes
    assert run.data.tags["stopped_reason"] == "none"
    assert run.data.tags["rounds_run"] == "3"


def test_mlflow_tags_the_reason_of_an_early_stopped_run(cancer, mlflow_uri):
    logger = MLflowLogger(experiment_name="fedct", tracking_uri=mlflow_uri)
    trainer = fit(cancer, [logger], rounds=10, early_stopping=1, trust=None)
    assert trainer.stopped_reason_ == "early stopping" and trainer.n_rounds_ < 10

    client = mlflow_client(mlflow_uri)
    run = client.get_run(logger.run_id_)
    assert run.info.status == "FINISHED"
    assert run.data.tags["stopped_reason"] == "early stopping"
    assert run.data.tags["rounds_run"] == str(trainer.n_rounds_)
    assert metric_history(client, logger.run_id_, "bytes_up") == [
        (r.round, float(r.bytes_up)) for r in trainer.history_
    ]


@pytest.mark.slow
def test_mlflow_resumed_fit_continues_the_same_run_without_duplicates(cancer, mlflow_uri, tmp_path):
    first = MLflowLogger(experiment_name="resume", tracking_uri=mlflow_uri)
    fit(cancer, [first], rounds=2, checkpoint_dir=tmp_path / "ckpt")
    again = MLflowLogger(run_id=first.run_id_, tracking_uri=mlflow_uri)
    extended = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3)] * 3,
        rounds=4,
        random_state=0,
        checkpoint_dir=tmp_path / "ckpt",
        callbacks=[again],
    )
    # MLflow parameters are immutable: the run keeps rounds=2, and says so
    with pytest.warns(TrackingWarning, match=r"parameters \['rounds'\]"):
        trainer = extended.fit(
            cancer["X"],
            cancer["y"],
            X_public=cancer["X_public"],
            eval_set=(cancer["X_test"], cancer["y_test"]),
            y_public=cancer["y_public"],
            resume=True,
        )
    assert len(trainer.history_) == 4
    client = mlflow_client(mlflow_uri)
    assert client.get_run(first.run_id_).data.params["rounds"] == "2"
    assert metric_history(client, first.run_id_, "bytes_up") == [
        (r.round, float(r.bytes_up)) for r in trainer.history_
    ]  # rounds 1-2 from the first fit, 3-4 from the resumed one, each once
    assert client.get_run(first.run_id_).info.status == "FINISHED"


def test_callbacks_survive_clone_and_copy(cancer, mlflow_uri, tmp_path, tensorboard):
    loggers = [MLflowLogger(tracking_uri=mlflow_uri), TensorBoardLogger(tmp_path / "tb")]
    trainer = fit(cancer, loggers, rounds=1)
    twin = clone(trainer)
    assert repr(twin.callbacks) == repr(loggers)
    copied = copy.deepcopy(loggers[0])
    assert copied.run_id_ == loggers[0].run_id_ and copied.error_ is None


def test_mlflow_logs_a_round_loop_directly(mlflow_uri):
    logger = MLflowLogger(
        experiment_name="loop",
        tracking_uri=mlflow_uri,
        params={"dataset": "synthetic"},
        tags={"team": "fl"},
    )
    loop = synthetic_loop([EarlyStopping(2), logger])
    assert loop.run() == "early stopping"  # after round 4: rounds 3 and 4 unchanged

    client = mlflow_client(mlflow_uri)
    run = client.get_run(logger.run_id_)
    assert run.info.status == "FINISHED"
    assert run.data.tags["stopped_reason"] == "early stopping"
    assert run.data.tags["team"] == "fl"
    assert metric_history(client, logger.run_id_, "n_failed") == [(1, 0), (2, 1), (3, 0), (4, 0)]
    assert metric_history(client, logger.run_id_, "n_timed_out") == [
        (1, 0), (2, 0), (3, 1), (4, 0)
    ]  # fmt: skip
    assert metric_history(client, logger.run_id_, "epsilon") == [(1, 0.5), (2, 1.0), (3, 1.5)]
    assert metric_history(client, logger.run_id_, "client_2_accuracy") == [(1, 0.7)]
    assert metric_history(client, logger.run_id_, "std_accuracy") == [(1, 0.0816496580927726)]
    params = run.data.params
    assert params["dataset"] == "synthetic" and params["rounds"] == "4"
    assert params["runtime"] == "object"
    assert params["sampler"] == "json.dumps"
    assert "broken" not in params  # a value that cannot be rendered is left out
    assert len(params["note"]) == 500


def test_mlflow_joins_an_active_run_and_leaves_it_open(mlflow_uri):
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_uri)
    try:
        with mlflow.start_run() as active:
            logger = MLflowLogger(log_params=False)
            synthetic_loop([logger], rounds=2).run()
            assert logger.run_id_ == active.info.run_id
            client = mlflow_client(mlflow_uri)
            assert client.get_run(active.info.run_id).info.status == "RUNNING"
            assert metric_history(client, active.info.run_id, "bytes_up") == [(1, 94), (2, 62)]
            assert client.get_run(active.info.run_id).data.params == {}
        assert client.get_run(active.info.run_id).info.status == "FINISHED"
    finally:
        mlflow.set_tracking_uri(previous)


def test_mlflow_logs_restored_rounds_a_new_run_lacks(mlflow_uri):
    restored = History()
    for record in RECORDS[:2]:
        restored.append(record)
    logger = MLflowLogger(tracking_uri=mlflow_uri, join_active=False)
    synthetic_loop([logger], rounds=3, start=3, history=restored).run()
    client = mlflow_client(mlflow_uri)
    assert metric_history(client, logger.run_id_, "bytes_up") == [(1, 94), (2, 62), (3, 62)]


def test_mlflow_failure_warns_once_and_the_federation_goes_on(mlflow_uri, monkeypatch):
    from mlflow import MlflowClient

    class BreakStore(Callback):
        def on_round_start(self, loop, t, sampled):
            if t == 2:

                def log_batch(*args, **kwargs):
                    raise OSError("disk full")

                monkeypatch.setattr(MlflowClient, "log_batch", log_batch)

    logger = MLflowLogger(tracking_uri=mlflow_uri)
    with pytest.warns(TrackingWarning) as caught:
        assert synthetic_loop([BreakStore(), logger]).run() is None
    assert len([w for w in caught if issubclass(w.category, TrackingWarning)]) == 1
    assert "logging round 2 failed (OSError: disk full)" in str(caught[0].message)
    assert isinstance(logger.error_, OSError)
    monkeypatch.undo()
    client = mlflow_client(mlflow_uri)
    assert metric_history(client, logger.run_id_, "bytes_up") == [(1, 94)]
    assert client.get_run(logger.run_id_).info.status == "FAILED"  # incomplete, not left open


def test_mlflow_strict_raises_tracking_errors(mlflow_uri, monkeypatch):
    from mlflow import MlflowClient

    def log_batch(*args, **kwargs):
        raise OSError("disk full")

    logger = MLflowLogger(tracking_uri=mlflow_uri, strict=True)
    loop = synthetic_loop([logger])
    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)
    with pytest.raises(OSError, match="disk full"):
        loop.run()


def test_mlflow_unreachable_store_warns_and_the_loop_runs(tmp_path):
    pytest.importorskip("mlflow")
    logger = MLflowLogger(tracking_uri="nosuchscheme://nowhere")
    with pytest.warns(TrackingWarning, match="opening the log failed"):
        loop = synthetic_loop([logger])
        loop.run()
    assert len(loop.history) == 4 and logger.error_ is not None


def test_mlflow_run_of_a_fit_that_raised_is_ended_failed(mlflow_uri):
    logger = MLflowLogger(tracking_uri=mlflow_uri)
    with pytest.raises(ArithmeticError):
        synthetic_loop([logger], fail_at=2).run()
    client = mlflow_client(mlflow_uri)
    assert client.get_run(logger.run_id_).info.status == "RUNNING"
    logger.close()
    assert client.get_run(logger.run_id_).info.status == "FAILED"
    # the next fit would do the same; here a fresh run finishes normally
    failed = logger.run_id_
    with pytest.raises(ArithmeticError):
        synthetic_loop([logger], fail_at=2).run()
    synthetic_loop([logger], rounds=1).run()
    assert client.get_run(logger.run_id_).info.status == "FINISHED" and logger.run_id_ != failed


# ----------------------------------------------------------------- TensorBoard


def test_tensorboard_writes_the_federation_scalars(cancer, tmp_path, tensorboard):
    logger = TensorBoardLogger(tmp_path / "tb")
    trainer = fit(cancer, [logger])
    history = trainer.history_
    scalars, acc = read_scalars(tmp_path / "tb")
    for key in ("bytes_up", "bytes_down", "coverage", "agreement", "mean_accuracy",
                "consensus_accuracy", "pseudo_label_accuracy", "time_s"):  # fmt: skip
        assert scalars[key] == [(r.round, float(np.float32(getattr(r, key)))) for r in history], key
    assert scalars["client_1_accuracy"] == [
        (r.round, float(np.float32(r.client_accuracy[1]))) for r in history
    ]
    assert [step for step, _ in scalars["changed"]] == [2, 3]
    assert set(scalars) == set(round_metrics(history[-1]))
    (params,) = acc.Tensors("params")
    table = params.tensor_proto.string_val[0].decode()
    assert "| rounds | 3 |" in table and "| consensus | auto |" in table


def test_tensorboard_flushes_every_round_and_logs_a_round_loop(tmp_path, tensorboard):
    seen = []

    class ReadBack(Callback):  # runs after the logger: the round must already be on disk
        def on_round_end(self, loop, record):
            scalars, _ = read_scalars(tmp_path / "tb")
            seen.append([step for step, _ in scalars["bytes_up"]])

    logger = TensorBoardLogger(tmp_path / "tb", log_params=False)
    assert synthetic_loop([EarlyStopping(2), logger, ReadBack()]).run() == "early stopping"
    assert seen == [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4]]
    scalars, acc = read_scalars(tmp_path / "tb")
    assert scalars["n_failed"] == [(1, 0.0), (2, 1.0), (3, 0.0), (4, 0.0)]
    assert scalars["n_timed_out"] == [(1, 0.0), (2, 0.0), (3, 1.0), (4, 0.0)]
    assert scalars["epsilon"] == [(1, 0.5), (2, 1.0), (3, 1.5)]
    assert scalars["std_accuracy"] == [(1, float(np.float32(0.0816496580927726)))]
    assert acc.Tags()["tensors"] == []  # log_params=False: no parameter table
    assert logger._writer is None  # closed at fit end


def test_tensorboard_resumed_run_reads_back_whole(tmp_path, tensorboard):
    synthetic_loop([TensorBoardLogger(tmp_path / "tb")], rounds=2).run()
    restored = History()
    for record in RECORDS[:3]:  # round 3 was checkpointed but never logged
        restored.append(record)
    synthetic_loop([TensorBoardLogger(tmp_path / "tb")], start=4, history=restored).run()
    scalars, _ = read_scalars(tmp_path / "tb")
    assert scalars["bytes_up"] == [(1, 94.0), (2, 62.0), (3, 62.0), (4, 0.0)]


def test_tensorboard_failure_warns_once_and_the_federation_goes_on(
    tmp_path, monkeypatch, tensorboard
):
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    class BreakDisk(Callback):
        def on_round_start(self, loop, t, sampled):
            if t == 2:
                monkeypatch.setattr(EventFileWriter, "add_event", raise_disk_full)

    logger = TensorBoardLogger(tmp_path / "tb")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert synthetic_loop([BreakDisk(), logger]).run() is None
    tracking = [w for w in caught if issubclass(w.category, TrackingWarning)]
    assert len(tracking) == 1 and "disk full" in str(tracking[0].message)
    monkeypatch.undo()
    scalars, _ = read_scalars(tmp_path / "tb")
    assert scalars["bytes_up"] == [(1, 94.0)]
    strict = synthetic_loop([BreakDisk(), TensorBoardLogger(tmp_path / "strict", strict=True)])
    with pytest.raises(OSError, match="disk full"):
        strict.run()
    assert len(strict.history) == 2  # raised at the end of round 2


def raise_disk_full(*args, **kwargs):
    raise OSError("disk full")


# ----------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"experiment_name": 3}, TypeError, "experiment_name"),
        ({"experiment_name": " "}, ValueError, "experiment_name"),
        ({"run_name": ["a"]}, TypeError, "run_name"),
        ({"tracking_uri": 5}, TypeError, "tracking_uri"),
        ({"tracking_uri": ""}, ValueError, "tracking_uri"),
        ({"run_id": "abc", "run_name": "x"}, ValueError, "run_id"),
        ({"log_params": "yes"}, TypeError, "log_params"),
        ({"params": [("a", 1)]}, TypeError, "params"),
        ({"tags": {1: "a"}}, TypeError, "tags"),
        ({"join_active": None}, TypeError, "join_active"),
        ({"strict": 1}, TypeError, "strict"),
    ],
)
def test_mlflow_logger_refuses_bad_arguments(kwargs, error, match):
    pytest.importorskip("mlflow")
    with pytest.raises(error, match=match):
        MLflowLogger(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"log_dir": None}, TypeError, "log_dir"),
        ({"log_dir": ""}, ValueError, "log_dir"),
        ({"log_dir": "runs", "log_params": 1}, TypeError, "log_params"),
        ({"log_dir": "runs", "strict": "no"}, TypeError, "strict"),
    ],
)
def test_tensorboard_logger_refuses_bad_arguments(kwargs, error, match, tensorboard):
    with pytest.raises(error, match=match):
        TensorBoardLogger(**kwargs)


def test_reprs_show_the_arguments_given():
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    assert repr(MLflowLogger()) == "MLflowLogger()"
    assert (
        repr(MLflowLogger(experiment_name="fedct", tracking_uri="sqlite:///m.db", strict=True))
        == "MLflowLogger(experiment_name='fedct', tracking_uri='sqlite:///m.db', strict=True)"
    )
    assert repr(TensorBoardLogger("runs/a")) == "TensorBoardLogger(log_dir='runs/a')"
    assert (
        repr(TensorBoardLogger("runs/a", log_params=False))
        == "TensorBoardLogger(log_dir='runs/a', log_params=False)"
    )
    with pytest.raises(ValueError, match="status"):
        MLflowLogger().close(status="DONE")


def test_missing_package_is_named_with_its_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("mlflow", "tensorboard") else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"cotrain\[mlflow\]"):
        MLflowLogger()
    with pytest.raises(ImportError, match=r"cotrain\[tensorboard\]"):
        TensorBoardLogger("runs")
