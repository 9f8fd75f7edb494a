"""Experiment tracking: round-loop callbacks that log every round to MLflow or TensorBoard.

Both loggers are :class:`~cotrain.callbacks.Callback` objects: pass them to
``FederatedCoTrainer(callbacks=[...])`` (or to any :class:`~cotrain.rounds.RoundLoop`) and
they log, per round, the scalars of :func:`round_metrics` at ``step=record.round``.

Failure policy
--------------
A tracking store is a side channel: a long federation should not die because a disk
filled up or a tracking server went away. Bad *arguments* raise at construction
(``TypeError``/``ValueError`` naming the argument; ``ImportError`` when the package is not
installed). A failure *while logging* (opening the run, writing a round, closing) is
reported once as a :class:`TrackingWarning`; the logger then stops logging for the rest
of that fit, keeps the exception in ``error_``, and the federation goes on. The next fit
tries again. ``strict=True`` re-raises instead (for pipelines where missing metrics
should fail the job).

The packages are imported only when a fit starts, so ``import cotrain.tracking`` needs
neither of them.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cotrain.callbacks import Callback

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.history import RoundRecord
    from cotrain.rounds import RoundLoop

__all__ = ["MLflowLogger", "TensorBoardLogger", "TrackingWarning", "render_param", "round_metrics"]

#: Longest rendered parameter value (MLflow servers before 2.x refused more than 500).
MAX_PARAM_LENGTH = 500
_MLFLOW_BATCH = 1000  # metrics per log_batch call (MLflow's limit)
_MLFLOW_PARAM_BATCH = 100  # params and tags per log_batch call (MLflow's limit)


class TrackingWarning(UserWarning):
    """A tracking backend failed; the logger stopped logging, the federation went on."""


def round_metrics(record: RoundRecord) -> dict[str, float]:
    """The numeric metrics of one round, as the loggers write them.

    Keys: ``coverage``, ``agreement``, ``changed`` (from round 2), ``bytes_up``,
    ``bytes_down``, ``time_s``, ``learner_time_s``; ``mean_accuracy``, ``std_accuracy``,
    ``consensus_accuracy``, ``pseudo_label_accuracy`` and ``epsilon`` when not None;
    ``client_<i>_accuracy`` per evaluated client; ``n_clients`` (asked), ``n_failed`` and
    ``n_timed_out``. Fields that are NaN (not measured, e.g. coverage in a baseline that
    has no consensus) are left out.

    Parameters
    ----------
    record : RoundRecord
        One round of a history.

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> from cotrain.history import RoundRecord
    >>> record = RoundRecord(round=2, clients=(0, 1, 2), failed={2: "boom"}, coverage=1.0,
    ...                      agreement=0.75, changed=3, bytes_up=94,
    ...                      client_accuracy={0: 0.9, 1: 0.8}, mean_accuracy=0.85)
    >>> metrics = round_metrics(record)
    >>> metrics["bytes_up"], metrics["client_1_accuracy"], metrics["n_failed"]
    (94.0, 0.8, 1.0)
    >>> "epsilon" in metrics
    False
    """
    metrics: dict[str, Any] = {
        "coverage": record.coverage,
        "agreement": record.agreement,
        "changed": record.changed,
        "bytes_up": record.bytes_up,
        "bytes_down": record.bytes_down,
        "time_s": record.time_s,
        "learner_time_s": record.learner_time_s,
        "mean_accuracy": record.mean_accuracy,
        "std_accuracy": record.std_accuracy,
        "consensus_accuracy": record.consensus_accuracy,
        "pseudo_label_accuracy": record.pseudo_label_accuracy,
        "epsilon": record.epsilon,
    }
    for client, accuracy in sorted(record.client_accuracy.items()):
        metrics[f"client_{client}_accuracy"] = accuracy
    metrics["n_clients"] = len(record.clients)
    metrics["n_failed"] = len(record.failed)
    metrics["n_timed_out"] = len(record.timed_out)
    out = {}
    for key, value in metrics.items():
        if value is None:
            continue
        value = float(value)
        if not math.isnan(value):
            out[key] = value
    return out


def render_param(value: Any, max_length: int = MAX_PARAM_LENGTH) -> str | None:
    """A parameter value as a short, stable string, or None when it cannot be shown.

    Scalars and strings as ``str``; estimators and containers as their ``repr`` on one
    line; objects whose ``repr`` is the default ``<... at 0x...>`` (it changes every run)
    as their qualified name; anything longer than ``max_length`` cut with ``...``.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> render_param(DecisionTreeClassifier(max_depth=3))
    'DecisionTreeClassifier(max_depth=3)'
    >>> render_param(object())
    'object'
    >>> render_param("x" * 600, max_length=10)
    'xxxxxxx...'
    """
    if value is None or isinstance(value, bool | int | float | str | np.generic):
        text = str(value)
    elif isinstance(value, os.PathLike):
        text = os.fspath(value)
        text = text.decode(errors="replace") if isinstance(text, bytes) else text
    else:
        try:
            text = repr(value)
        except Exception:  # a broken __repr__: leave the parameter out
            return None
        if " at 0x" in text:  # the default repr: an address, different in every run
            kind = value if callable(value) and hasattr(value, "__qualname__") else type(value)
            text = f"{getattr(kind, '__module__', '')}.{kind.__qualname__}".lstrip(".")
            text = text.removeprefix("builtins.")
    text = " ".join(text.split())  # multi-line reprs (lists of estimators) on one line
    if len(text) > max_length:
        text = text[: max_length - 3] + "..."
    return text


def _owner_params(loop: RoundLoop) -> dict[str, str]:
    """``loop.owner.get_params(deep=False)`` rendered with :func:`render_param`.

    Empty when the owner has no ``get_params``. Left out: parameters that cannot be
    rendered, and ``callbacks`` (how the run is observed, not what it computes; it holds
    the loggers themselves).
    """
    get_params = getattr(loop.owner, "get_params", None)
    if not callable(get_params):
        return {}
    params = {}
    for key, value in sorted(get_params(deep=False).items()):
        if key == "callbacks":
            continue
        text = render_param(value)
        if text is not None:
            params[str(key)] = text
    return params


def _check_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")


def _check_optional_str(value: Any, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty")


def _check_mapping(value: Any, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of str to values, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or not key:
            raise TypeError(f"{name} keys must be non-empty strings, got {key!r}")


def _require(module: str, extra: str, cls: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ImportError(f'{cls} needs {module}: pip install "cotrain[{extra}]"')


class _TrackingCallback(Callback):
    """The failure policy shared by the loggers (see the module docstring)."""

    _defaults: tuple[tuple[str, Any], ...] = ()
    _runtime: tuple[str, ...] = ()  # open handles: dropped from copies and pickles

    def __init__(self, strict: bool) -> None:
        _check_bool(strict, "strict")
        self.strict = strict
        self.error_: BaseException | None = None
        self._active = False

    def _guard(self, action: str, fn: Callable[..., None], *args: Any) -> bool:
        """Run ``fn``; on failure warn once, stop logging for this fit (or raise if strict)."""
        try:
            fn(*args)
        except Exception as err:
            if self.strict:
                raise
            self._active = False
            if self.error_ is None:
                self.error_ = err
                warnings.warn(
                    f"{type(self).__name__}: {action} failed ({type(err).__name__}: {err}); "
                    "tracking is off for the rest of this fit, the federation goes on",
                    TrackingWarning,
                    stacklevel=4,
                )
            self._after_failure()
            return False
        return True

    def _after_failure(self) -> None:
        """Release what the failed fit held, without raising."""

    def on_fit_start(self, loop: RoundLoop) -> None:
        self._after_failure()  # a previous fit that ended with an exception
        self.error_ = None
        self._active = True
        self._guard("opening the log", self._open, loop)

    def on_round_end(self, loop: RoundLoop, record: RoundRecord) -> None:
        if self._active:
            self._guard(f"logging round {record.round}", self._log_records, [record])

    def on_fit_end(self, loop: RoundLoop) -> None:
        if self._active:
            self._guard("closing the log", self._close, loop)
        else:
            self._after_failure()
        self._active = False

    def _open(self, loop: RoundLoop) -> None:
        raise NotImplementedError

    def _log_records(self, records: Iterable[RoundRecord]) -> None:
        raise NotImplementedError

    def _close(self, loop: RoundLoop) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in self._runtime:
            state[key] = None
        state["_active"] = False
        return state

    def __repr__(self) -> str:
        args = [
            f"{name}={getattr(self, name)!r}"
            for name, default in self._defaults
            if getattr(self, name) != default
        ]
        return f"{type(self).__name__}({', '.join(args)})"


class MLflowLogger(_TrackingCallback):
    """Log a federated run to MLflow: parameters once, every round's metrics, the outcome.

    On fit start the logger opens a run: it joins the active MLflow run if there is one
    (``with mlflow.start_run(): trainer.fit(...)``), reopens ``run_id`` if given, or
    creates a run in ``experiment_name``. It logs the owner's ``get_params(deep=False)``
    (the trainer's parameters) rendered as short strings, then at the end of every round
    the metrics of :func:`round_metrics` at ``step=record.round``, and at fit end the tags
    ``stopped_reason`` (the loop's reason, or ``"none"``) and ``rounds_run``. It ends the
    run (``FINISHED``) only if it created or reopened it; a joined run stays open.

    Logging goes through an :class:`mlflow.MlflowClient`, so it never changes MLflow's
    global state (tracking URI, active run). After a resume the rounds restored from the
    checkpoint that the run does not hold yet are logged at fit start, so the run ends up
    with every round. A tracking failure warns once (:class:`TrackingWarning`) and stops
    logging for the rest of the fit; the federation goes on (``strict=True`` raises). A
    run this logger opened and could not log to completely is ended as ``FAILED`` with a
    ``tracking_error`` tag, where the store still answers. If the fit itself raises,
    ``on_fit_end`` is not called: the run is ended ``FAILED`` by :meth:`close` or at the
    next fit start.

    Parameters
    ----------
    experiment_name : str, optional
        Experiment of a new run, created if missing. Default: ``MLFLOW_EXPERIMENT_NAME``
        or ``MLFLOW_EXPERIMENT_ID`` (and, without ``tracking_uri``, the experiment chosen
        with ``mlflow.set_experiment``), else the store's default experiment.
    run_name : str, optional
        Name of a new run (MLflow picks one if None).
    tracking_uri : str, optional
        Where to log, e.g. ``"sqlite:///mlflow.db"`` or ``"http://host:5000"``; None uses
        MLflow's (``mlflow.set_tracking_uri`` or ``MLFLOW_TRACKING_URI``). MLflow 3
        refuses plain directories (the file store) unless ``MLFLOW_ALLOW_FILE_STORE=true``.
    run_id : str, optional
        An existing run to log into (e.g. to continue a resumed fit in the same run); it
        is marked running again and ended at fit end. Excludes ``experiment_name`` and
        ``run_name``.
    log_params : bool, default=True
        Log the owner's parameters. In a run that already holds a parameter with another
        value, the old value stays (MLflow parameters are immutable) and a warning names it.
    params : mapping of str to object, optional
        More parameters to log (e.g. the dataset and split), rendered the same way.
    tags : mapping of str to object, optional
        Tags set on the run at fit start.
    join_active : bool, default=True
        Join the active MLflow run when there is one (and ``tracking_uri`` is None or
        MLflow's current URI); False always opens a run of its own.
    strict : bool, default=False
        Raise tracking errors instead of warning once and going on without tracking.

    Attributes
    ----------
    run_id_ : str or None
        The run logged into by the last fit.
    error_ : Exception or None
        What stopped logging in the last fit, or None.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain import FederatedCoTrainer
    >>> from cotrain.tracking import MLflowLogger
    >>> logger = MLflowLogger(experiment_name="fedct", run_name="trees",
    ...                       tracking_uri="sqlite:///mlflow.db")  # doctest: +SKIP
    >>> logger  # doctest: +SKIP
    MLflowLogger(experiment_name='fedct', run_name='trees', tracking_uri='sqlite:///mlflow.db')
    >>> trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=10,
    ...                              callbacks=[logger])  # doctest: +SKIP
    >>> trainer = trainer.fit(X, y, X_public=U, eval_set=(X_test, y_test))  # doctest: +SKIP
    >>> from mlflow import MlflowClient  # doctest: +SKIP
    >>> client = MlflowClient("sqlite:///mlflow.db")  # doctest: +SKIP
    >>> [m.value for m in client.get_metric_history(logger.run_id_, "mean_accuracy")]
    ... # doctest: +SKIP
    [0.91, 0.93, ...]
    """

    _defaults = (
        ("experiment_name", None),
        ("run_name", None),
        ("tracking_uri", None),
        ("run_id", None),
        ("log_params", True),
        ("params", None),
        ("tags", None),
        ("join_active", True),
        ("strict", False),
    )
    _runtime = ("_client",)

    def __init__(
        self,
        experiment_name: str | None = None,
        run_name: str | None = None,
        tracking_uri: str | None = None,
        run_id: str | None = None,
        log_params: bool = True,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        join_active: bool = True,
        strict: bool = False,
    ) -> None:
        _check_optional_str(experiment_name, "experiment_name")
        _check_optional_str(run_name, "run_name")
        _check_optional_str(run_id, "run_id")
        _check_optional_str(tracking_uri, "tracking_uri")
        if run_id is not None and (experiment_name is not None or run_name is not None):
            raise ValueError(
                "run_id names an existing run: give run_id, or experiment_name/run_name "
                "for a new run, not both"
            )
        _check_bool(log_params, "log_params")
        _check_bool(join_active, "join_active")
        _check_mapping(params, "params")
        _check_mapping(tags, "tags")
        _require("mlflow", "mlflow", "MLflowLogger")
        super().__init__(strict)
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tracking_uri = tracking_uri
        self.run_id = run_id
        self.log_params = log_params
        self.params = params
        self.tags = tags
        self.join_active = join_active
        self.run_id_: str | None = None
        self._client: Any = None
        self._owned = False

    # -------------------------------------------------------------- the run
    def _open(self, loop: RoundLoop) -> None:
        import mlflow
        from mlflow import MlflowClient
        from mlflow.entities import Param, RunTag

        uri = self.tracking_uri
        active = mlflow.active_run() if self.join_active and self.run_id is None else None
        if active is not None and uri in (None, mlflow.get_tracking_uri()):
            self._client = MlflowClient(mlflow.get_tracking_uri())
            run_id, self._owned, fresh = active.info.run_id, False, False
        else:
            self._client = MlflowClient(uri)
            if self.run_id is not None:
                run_id, fresh = self.run_id, False
                self._client.get_run(run_id)  # fails clearly for an unknown id
                self._client.update_run(run_id, status="RUNNING")
            else:
                experiment_id = self._experiment_id(mlflow, uri)
                run = self._client.create_run(experiment_id, run_name=self.run_name)
                run_id, fresh = run.info.run_id, True
            self._owned = True
        self.run_id_ = run_id
        logged = {} if fresh else self._client.get_run(run_id).data.params
        params: dict[str, str] = {}
        if self.log_params:
            params.update(_owner_params(loop))
        for key, value in (self.params or {}).items():
            text = render_param(value)
            if text is not None:
                params[key] = text
        clash = sorted(k for k, v in params.items() if k in logged and logged[k] != v)
        if clash:
            warnings.warn(
                f"MLflowLogger: run {run_id} already has parameters {clash} with other "
                "values; MLflow parameters cannot change, the old values stay",
                TrackingWarning,
                stacklevel=4,
            )
        new = [Param(k, v) for k, v in params.items() if k not in logged]
        tags = [RunTag(k, render_param(v) or "") for k, v in (self.tags or {}).items()]
        self._log_batch(params=new, tags=tags)
        restored = list(loop.history)
        if restored and not fresh:  # only the rounds the run does not hold yet
            have = {m.step for m in self._client.get_metric_history(run_id, "n_clients")}
            restored = [r for r in restored if r.round not in have]
        self._log_records(restored)

    def _experiment_id(self, mlflow: Any, uri: str | None) -> str:
        name = self.experiment_name
        if name is None:
            if uri is None:  # the experiment chosen for MLflow's own store, if any
                chosen = getattr(mlflow.tracking.fluent, "_get_experiment_id", lambda: None)()
                if chosen is not None:
                    return str(chosen)
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or None
            if name is None:  # else the store's Default experiment, "0"
                return os.environ.get("MLFLOW_EXPERIMENT_ID") or "0"
        experiment = self._client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        try:
            return self._client.create_experiment(name)
        except Exception:  # created meanwhile by another process
            experiment = self._client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return experiment.experiment_id

    def _log_records(self, records: Iterable[RoundRecord]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(key, value, now, record.round)
            for record in records
            for key, value in round_metrics(record).items()
        ]
        for i in range(0, len(metrics), _MLFLOW_BATCH):
            self._client.log_batch(self.run_id_, metrics=metrics[i : i + _MLFLOW_BATCH])

    def _log_batch(self, params: Sequence[Any] = (), tags: Sequence[Any] = ()) -> None:
        for i in range(0, len(params), _MLFLOW_PARAM_BATCH):
            self._client.log_batch(self.run_id_, params=params[i : i + _MLFLOW_PARAM_BATCH])
        for i in range(0, len(tags), _MLFLOW_PARAM_BATCH):
            self._client.log_batch(self.run_id_, tags=tags[i : i + _MLFLOW_PARAM_BATCH])

    def _close(self, loop: RoundLoop) -> None:
        from mlflow.entities import RunTag

        reason = "none" if loop.stopped_reason is None else str(loop.stopped_reason)
        self._log_batch(
            tags=[RunTag("stopped_reason", reason), RunTag("rounds_run", str(len(loop.history)))]
        )
        if self._owned:
            self._client.set_terminated(self.run_id_, status="FINISHED")
        self._client, self._owned = None, False

    def _after_failure(self) -> None:
        """End a run this logger opened and could not finish as FAILED, if the store answers."""
        client, owned = self._client, self._owned
        self._client, self._owned = None, False
        if client is None or not owned or self.run_id_ is None:
            return
        try:
            from mlflow.entities import RunTag

            if self.error_ is not None:
                text = render_param(f"{type(self.error_).__name__}: {self.error_}") or ""
                client.log_batch(self.run_id_, tags=[RunTag("tracking_error", text)])
        except Exception:  # logging is what failed: the status may still get through
            pass
        try:
            client.set_terminated(self.run_id_, status="FAILED")
        except Exception:  # the store is gone: nothing more to do
            pass

    def close(self, status: str = "FAILED") -> None:
        """End the run this logger opened, e.g. after a fit that raised.

        Parameters
        ----------
        status : {"FAILED", "KILLED", "FINISHED"}, default="FAILED"
            The run's final status. A joined run, or one already ended, is left alone.
        """
        if status not in ("FAILED", "KILLED", "FINISHED"):
            raise ValueError(f"status must be 'FAILED', 'KILLED' or 'FINISHED', got {status!r}")
        client, owned = self._client, self._owned
        self._client, self._owned, self._active = None, False, False
        if client is not None and owned and self.run_id_ is not None:
            client.set_terminated(self.run_id_, status=status)


class TensorBoardLogger(_TrackingCallback):
    """Write every round's metrics as TensorBoard scalars, at ``step=record.round``.

    Each fit writes one new event file in ``log_dir`` (point ``tensorboard --logdir`` at
    its parent to compare runs): the scalars of :func:`round_metrics` under the same names
    as :class:`MLflowLogger`, and with ``log_params`` the owner's parameters as a text
    summary ``params`` (a Markdown table, step 0). The file is flushed after every round
    and closed at fit end. After a resume the restored rounds are written again first, so
    the new file holds the whole run. Each file starts with a restart marker at its first
    step, so TensorBoard's reader drops the values of older files in ``log_dir`` from that
    step on: a resumed run reads back once per round, and a new run in a reused
    ``log_dir`` replaces the old one rather than mixing with it.

    The writer is TensorBoard's own event-file writer (``tensorboard`` is the only
    dependency; ``torch.utils.tensorboard.SummaryWriter`` writes through the same class),
    so neither torch nor TensorFlow is needed. Scalars are float32, as in every
    TensorBoard scalar: byte counts above 2**24 lose their last digits there (MLflow keeps
    float64). A write failure warns once (:class:`TrackingWarning`) and stops logging for
    the rest of the fit; ``strict=True`` raises.

    Parameters
    ----------
    log_dir : str or path
        Directory of this run's event files (created if missing).
    log_params : bool, default=True
        Write the owner's ``get_params(deep=False)`` as a text summary.
    strict : bool, default=False
        Raise write errors instead of warning once and going on without tracking.

    Attributes
    ----------
    error_ : Exception or None
        What stopped logging in the last fit, or None.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain import FederatedCoTrainer
    >>> from cotrain.tracking import TensorBoardLogger
    >>> logger = TensorBoardLogger("runs/trees")  # doctest: +SKIP
    >>> logger  # doctest: +SKIP
    TensorBoardLogger(log_dir='runs/trees')
    >>> trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=10,
    ...                              callbacks=[logger])  # doctest: +SKIP
    >>> trainer = trainer.fit(X, y, X_public=U, eval_set=(X_test, y_test))  # doctest: +SKIP
    >>> # then: tensorboard --logdir runs
    """

    _defaults = (("log_dir", None), ("log_params", True), ("strict", False))
    _runtime = ("_writer",)

    def __init__(
        self, log_dir: str | os.PathLike[str], log_params: bool = True, strict: bool = False
    ) -> None:
        if not isinstance(log_dir, str | os.PathLike):
            raise TypeError(f"log_dir must be a string or a path, got {type(log_dir).__name__}")
        if not os.fspath(log_dir):
            raise ValueError("log_dir must not be empty")
        _check_bool(log_params, "log_params")
        _require("tensorboard", "tensorboard", "TensorBoardLogger")
        super().__init__(strict)
        self.log_dir = log_dir
        self.log_params = log_params
        self._writer: Any = None

    def _open(self, loop: RoundLoop) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(os.fspath(self.log_dir), flush_secs=30)
        # a (re)start from this step: readers drop older files' values from here on
        first = loop.history[0].round if len(loop.history) else loop.start
        start = SessionLog(status=SessionLog.START)
        self._writer.add_event(Event(wall_time=time.time(), step=first, session_log=start))
        if self.log_params:
            params = _owner_params(loop)
            if params:
                self._write_text("params", _markdown_table(params), step=0)
        self._log_records(loop.history)  # a resumed run: the restored rounds first

    def _write_text(self, tag: str, text: str, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

        metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
        tensor = TensorProto(
            dtype="DT_STRING",
            string_val=[text.encode("utf-8")],
            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
        )
        value = Summary.Value(tag=tag, metadata=metadata, tensor=tensor)
        self._writer.add_event(
            Event(wall_time=time.time(), step=step, summary=Summary(value=[value]))
        )

    def _log_records(self, records: Iterable[RoundRecord]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        for record in records:
            values = [
                Summary.Value(tag=key, simple_value=value)
                for key, value in round_metrics(record).items()
            ]
            self._writer.add_event(
                Event(wall_time=time.time(), step=record.round, summary=Summary(value=values))
            )
        self._writer.flush()

    def _close(self, loop: RoundLoop) -> None:
        writer, self._writer = self._writer, None
        writer.close()

    def _after_failure(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # the disk is gone: nothing more to do
                pass

    def close(self) -> None:
        """Close the event file, e.g. after a fit that raised (``on_fit_end`` closes it)."""
        writer, self._writer, self._active = self._writer, None, False
        if writer is not None:
            writer.close()


def _markdown_table(params: Mapping[str, str]) -> str:
    rows = "\n".join(
        f"| {key} | {value.replace('|', chr(92) + '|')} |" for key, value in params.items()
    )
    return f"| parameter | value |\n|---|---|\n{rows}"
