"""TensorBoardLogger: every round of a federation written as TensorBoard scalars."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cotrain.tracking.common import (
    TrackingCallback,
    check_bool,
    owner_params,
    require_package,
    round_metrics,
)

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.federation.loop import RoundLoop
    from cotrain.history import RoundRecord

__all__ = ["TensorBoardLogger"]


class TensorBoardLogger(TrackingCallback):
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
        check_bool(log_params, "log_params")
        require_package("tensorboard", "tensorboard", "TensorBoardLogger")
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
            params = owner_params(loop)
            if params:
                self._write_text("params", markdown_table(params), step=0)
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


def markdown_table(params: Mapping[str, str]) -> str:
    rows = "\n".join(
        f"| {key} | {value.replace('|', chr(92) + '|')} |" for key, value in params.items()
    )
    return f"| parameter | value |\n|---|---|\n{rows}"
