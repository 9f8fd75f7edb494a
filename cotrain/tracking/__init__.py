"""Experiment tracking: round-loop callbacks that log every round to MLflow or TensorBoard.

Both loggers are :class:`~cotrain.callbacks.Callback` objects: pass them to
``FederatedCoTrainer(callbacks=[...])`` (or to any :class:`~cotrain.federation.loop.RoundLoop`) and
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

from cotrain.tracking.common import TrackingWarning, render_param, round_metrics
from cotrain.tracking.mlflow_logger import MLflowLogger
from cotrain.tracking.tensorboard_logger import TensorBoardLogger

__all__ = ["MLflowLogger", "TensorBoardLogger", "TrackingWarning", "render_param", "round_metrics"]


def __dir__() -> list[str]:
    return sorted(__all__)
