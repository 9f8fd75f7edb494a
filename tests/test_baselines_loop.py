"""Every baseline runs on the one RoundLoop: callbacks, progress lines, stopping, tracking.

FedAvg, DP-FedAvg, FedDF, FedDS, FedAUX and PATE call a user's callbacks exactly as
FederatedCoTrainer does: ``on_fit_start`` once, ``on_round_start``/``on_round_end`` per
round with the round's :class:`~cotrain.history.RoundRecord` (already in ``history_``),
``on_fit_end`` once, in that order, with the estimator as ``loop.owner``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.naive_bayes import GaussianNB

from cotrain.baselines import PATE, DPFedAvg, FedAUX, FedAvg, FedDF, FedDS
from cotrain.callbacks import Callback
from cotrain.history import RoundRecord


class Recorder(Callback):
    """Records every hook with what it was given."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_fit_start(self, loop):
        self.events.append(("fit_start", loop.owner, len(loop.history)))

    def on_round_start(self, loop, t, sampled):
        self.events.append(("round_start", t, tuple(int(i) for i in sampled)))

    def on_round_end(self, loop, record):
        self.events.append(("round_end", record, loop.history[-1] is record))

    def on_fit_end(self, loop):
        self.events.append(("fit_end", loop.stopped_reason))


class StopAfter(Callback):
    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def on_round_end(self, loop, record):
        if record.round >= self.rounds:
            loop.stop("enough")


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return {
        "X": [X[:80], X[80:160], X[160:240]],
        "y": [y[:80], y[80:160], y[160:240]],
        "X_public": X[240:400],
        "eval_set": (X[1500:], y[1500:]),
    }


def mlp():
    pytest.importorskip("torch")
    from learners import TorchClassifier
    from learners.modules import MLP

    return TorchClassifier(MLP, module_params={"hidden": (16,)}, random_state=0, lr=1e-2)


def cnn():
    pytest.importorskip("torch")
    from learners import SmallCNN, TorchClassifier

    return TorchClassifier(SmallCNN, module_params={"width": 4}, random_state=0)


def make(cls, estimator, callbacks, kw, **defaults):
    return cls(estimator, callbacks=callbacks, **{"rounds": 2, "random_state": 0, **defaults, **kw})


def fedavg(callbacks, **kw):
    return make(FedAvg, mlp(), callbacks, kw)


def dpfedavg(callbacks, **kw):
    pytest.importorskip("dp_accounting")
    return make(DPFedAvg, mlp(), callbacks, kw)


def feddf(callbacks, **kw):
    return make(FedDF, mlp(), callbacks, kw, distill_epochs=1)


def fedds(callbacks, **kw):
    return make(FedDS, cnn(), callbacks, kw, distill_epochs=1)


def fedaux(callbacks, **kw):
    return make(FedAUX, mlp(), callbacks, kw, distill_epochs=1)


ROUND_METHODS = {"FedAvg": fedavg, "DPFedAvg": dpfedavg, "FedDF": feddf, "FedDS": fedds,
                 "FedAUX": fedaux}  # fmt: skip
PUBLIC = {"FedDF", "FedDS", "FedAUX"}


def fit(name, model, digits):
    kw = {"X_public": digits["X_public"]} if name in PUBLIC else {}
    return model.fit(digits["X"], digits["y"], eval_set=digits["eval_set"], **kw)


def assert_protocol(events, model, n_rounds, clients):
    assert [e[0] for e in events] == (
        ["fit_start"] + ["round_start", "round_end"] * n_rounds + ["fit_end"]
    )
    assert events[0] == ("fit_start", model, 0)
    starts = [e for e in events if e[0] == "round_start"]
    ends = [e for e in events if e[0] == "round_end"]
    assert [t for _, t, _ in starts] == list(range(1, n_rounds + 1))
    for (_, t, sampled), (_, record, appended) in zip(starts, ends, strict=True):
        assert isinstance(record, RoundRecord)
        assert record.round == t and record.clients == sampled == clients
        assert appended  # on_round_end sees the record already in the history
    assert [e[1] for e in ends] == list(model.history_)
    assert events[-1] == ("fit_end", None)
    assert model.stopped_reason_ is None and model.n_rounds_ == n_rounds


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ROUND_METHODS))
def test_each_round_method_calls_the_callbacks_in_order(name, digits):
    recorder = Recorder()
    model = fit(name, ROUND_METHODS[name]([recorder]), digits)
    assert_protocol(recorder.events, model, 2, (0, 1, 2))
    # the records carry what the method measured (bytes both ways, the global accuracy)
    for record in model.history_:
        assert record.bytes_up > 0 and record.bytes_down > 0
        assert record.mean_accuracy is not None


def test_pate_calls_the_callbacks_around_its_one_round():
    X, y = load_breast_cancer(return_X_y=True)
    recorder = Recorder()
    pate = PATE([GaussianNB()] * 3, GaussianNB(), noise_sigma=0.0, random_state=0,
                callbacks=[recorder])  # fmt: skip
    pate.fit([X[:40], X[40:80], X[80:120]], [y[:40], y[40:80], y[80:120]], X_public=X[120:400])
    assert_protocol(recorder.events, pate, 1, (0, 1, 2))
    assert recorder.events[2][1].bytes_up == pate.history_[0].bytes_up > 0


def test_the_same_seed_gives_the_same_result_with_and_without_callbacks(digits):
    plain = fit("FedDF", feddf(None), digits)
    watched = fit("FedDF", feddf([Recorder()], verbose=2), digits)
    X_test = digits["eval_set"][0]
    np.testing.assert_array_equal(plain.predict_proba(X_test), watched.predict_proba(X_test))
    assert [r.bytes_up for r in plain.history_] == [r.bytes_up for r in watched.history_]


@pytest.mark.parametrize("name", ["FedAvg", "FedAUX"])
def test_a_callback_stops_a_baseline_after_a_round(name, digits):
    recorder = Recorder()
    model = fit(name, ROUND_METHODS[name]([StopAfter(1), recorder]), digits)
    assert model.stopped_reason_ == "enough" and model.n_rounds_ == len(model.history_) == 1
    assert recorder.events[-1] == ("fit_end", "enough")


def test_verbose_prints_a_bar_and_one_line_per_round(digits, capsys):
    fit("FedAvg", fedavg(None, verbose=2), digits)
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("round")]
    assert [line.split(":")[0].split() for line in lines] == [["round", "1"], ["round", "2"]]
    assert "3 clients" in lines[0] and "FedAvg" in captured.err  # the bar's label
    assert "nan" not in lines[0]  # FedAvg has no coverage or agreement to print
    fit("DPFedAvg", dpfedavg(None, verbose=2, noise_multiplier=1.0), digits)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("round")]
    assert len(lines) == 2 and all(" ε " in line for line in lines)
    fit("FedAvg", fedavg(None, verbose=0), digits)
    captured = capsys.readouterr()
    assert captured.out == "" and "FedAvg" not in captured.err


def test_feddf_records_how_many_targets_changed_and_stops_early(digits):
    model = fit("FedDF", feddf(None, rounds=3), digits)
    changed = [r.changed for r in model.history_]
    assert changed[0] is None and all(isinstance(c, int) for c in changed[1:])
    assert all(0 <= c <= len(digits["X_public"]) for c in changed[1:])

    class Settling(FedDF):  # a federation whose consensus never changes after round 1
        def _consensus_fields(self):
            return {"changed": None if not self.history_ else 0}

    recorder = Recorder()
    model = Settling(mlp(), rounds=5, distill_epochs=1, random_state=0, early_stopping=2,
                     callbacks=[recorder])  # fmt: skip
    fit("FedDF", model, digits)
    assert model.stopped_reason_ == "early stopping" and model.n_rounds_ == 3
    assert recorder.events[-1] == ("fit_end", "early stopping")
    with pytest.raises(ValueError, match="early_stopping"):
        fit("FedDF", feddf(None, early_stopping=0), digits)


class Crash(Callback):
    """Interrupts the run before round ``at`` (a crash between two rounds)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_round_start(self, loop, t, sampled):
        if t == self.at:
            raise KeyboardInterrupt


def same_run(a, b, X_test):
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    for ra, rb in zip(a.history_, b.history_, strict=True):
        assert (ra.round, ra.clients, ra.bytes_up, ra.bytes_down, ra.changed) == (
            rb.round, rb.clients, rb.bytes_up, rb.bytes_down, rb.changed
        )  # fmt: skip
        assert (ra.mean_accuracy, ra.client_accuracy, ra.epsilon) == (
            rb.mean_accuracy, rb.client_accuracy, rb.epsilon
        )  # fmt: skip
    for ca, cb in zip(a.clients_, b.clients_, strict=True):
        np.testing.assert_array_equal(ca.predict_proba(X_test), cb.predict_proba(X_test))


CHECKPOINTED = {
    "FedAvg": lambda cb, **kw: fedavg(cb, participation=0.67, **kw),
    # compared with a second, uninterrupted run: the same noise needs the (warned) opt-in
    "DPFedAvg": lambda cb, **kw: dpfedavg(cb, noise_multiplier=0.5, reproducible_noise=True, **kw),
    "FedDF": lambda cb, **kw: feddf(cb, **kw),
    "FedDS": lambda cb, **kw: fedds(cb, **kw),
}


@pytest.mark.parametrize("name", sorted(CHECKPOINTED))
def test_a_resumed_run_equals_an_uninterrupted_one(name, digits, tmp_path):
    make = CHECKPOINTED[name]
    whole = fit(name, make(None, rounds=3), digits)
    with pytest.raises(KeyboardInterrupt):
        fit(name, make([Crash(3)], rounds=3, checkpoint_dir=tmp_path), digits)
    recorder = Recorder()
    model = make([recorder], rounds=3, checkpoint_dir=tmp_path)
    kw = {"X_public": digits["X_public"]} if name in PUBLIC else {}
    model.fit(digits["X"], digits["y"], eval_set=digits["eval_set"], resume=True, **kw)
    # only round 3 ran; the restored rounds were in the history before it
    assert [e[1] for e in recorder.events if e[0] == "round_start"] == [3]
    assert recorder.events[0][2] == 2
    same_run(model, whole, digits["eval_set"][0])
    if name == "DPFedAvg":
        assert model.epsilon_ == whole.epsilon_
    # a finished run is restored without training
    again = make(None, rounds=3, checkpoint_dir=tmp_path)
    again.fit(digits["X"], digits["y"], eval_set=digits["eval_set"], resume=True, **kw)
    same_run(again, whole, digits["eval_set"][0])


def test_a_checkpoint_of_other_data_or_parameters_is_refused(digits, tmp_path):
    from cotrain.persistence.checkpoint import CheckpointError

    fit("FedAvg", fedavg(None, checkpoint_dir=tmp_path), digits)
    other = fedavg(None, checkpoint_dir=tmp_path, local_epochs=2)
    with pytest.raises(CheckpointError, match="different configuration"):
        other.fit(digits["X"], digits["y"], resume=True)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        fedavg(None).fit(digits["X"], digits["y"], resume=True)


@pytest.mark.parametrize(
    ("name", "params", "what"),
    [
        ("FedAvg", {"compression": "stc"}, "compression residuals"),
        ("FedAUX", {}, "certainty scorers"),
    ],
)
def test_a_state_that_cannot_be_checkpointed_is_refused_by_name(
    name, params, what, digits, tmp_path
):
    model = ROUND_METHODS[name](None, checkpoint_dir=str(tmp_path), **params)
    with pytest.raises(NotImplementedError, match=f"{name} cannot checkpoint.*{what}"):
        fit(name, model, digits)
    assert not any(tmp_path.iterdir())


def test_bad_callbacks_are_refused_by_name(digits):
    with pytest.raises(TypeError, match=r"callbacks\[0\]"):
        fit("FedAvg", fedavg([print]), digits)
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(TypeError, match="callbacks"):
        PATE([GaussianNB()] * 2, GaussianNB(), callbacks=Recorder()).fit(
            [X[:40], X[40:80]], [y[:40], y[40:80]], X_public=X[80:200]
        )


def test_tensorboard_logs_a_baseline(digits, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from cotrain.tracking import TensorBoardLogger

    model = fit("FedAvg", fedavg([TensorBoardLogger(tmp_path / "tb")]), digits)
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    logged = [(e.step, e.value) for e in acc.Scalars("bytes_up")]
    assert logged == [(r.round, float(r.bytes_up)) for r in model.history_]
    assert "coverage" not in acc.Tags()["scalars"]  # NaN for FedAvg: left out
