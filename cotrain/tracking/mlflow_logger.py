"""MLflowLogger: every round of a federation logged to an MLflow run."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cotrain.tracking.common import (
    TrackingCallback,
    TrackingWarning,
    check_bool,
    check_mapping,
    check_optional_str,
    owner_params,
    render_param,
    require_package,
    round_metrics,
)

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.federation.loop import RoundLoop
    from cotrain.history import RoundRecord

__all__ = ["MLflowLogger"]

_MLFLOW_BATCH = 1000  # metrics per log_batch call (MLflow's limit)
_MLFLOW_PARAM_BATCH = 100  # params and tags per log_batch call (MLflow's limit)


class MLflowLogger(TrackingCallback):
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
        check_optional_str(experiment_name, "experiment_name")
        check_optional_str(run_name, "run_name")
        check_optional_str(run_id, "run_id")
        check_optional_str(tracking_uri, "tracking_uri")
        if run_id is not None and (experiment_name is not None or run_name is not None):
            raise ValueError(
                "run_id names an existing run: give run_id, or experiment_name/run_name "
                "for a new run, not both"
            )
        check_bool(log_params, "log_params")
        check_bool(join_active, "join_active")
        check_mapping(params, "params")
        check_mapping(tags, "tags")
        require_package("mlflow", "mlflow", "MLflowLogger")
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
            params.update(owner_params(loop))
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
